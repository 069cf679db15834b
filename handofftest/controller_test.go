package handofftest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// readiness returns the readiness of every set of the world's family.
func readiness(t *testing.T, w *handofftest.World) map[string]handoff.State {
	t.Helper()
	got := map[string]handoff.State{}
	for _, o := range w.Cluster.Objects() {
		if o.GetKind() != "TektonInstallerSet" {
			continue
		}
		s, err := w.Family.Observe(o)
		if err != nil {
			t.Fatal(err)
		}
		got[s.Role] = s.Readiness.State
	}
	return got
}

func TestSetControllerReadyWhen(t *testing.T) {
	ctx := context.Background()
	errProbe := errors.New("probe failed")
	for name, tc := range map[string]struct {
		ready   func(*unstructured.Unstructured) (bool, error)
		want    handoff.State
		wantErr error
	}{
		"true marks the set Ready":            {ready: func(*unstructured.Unstructured) (bool, error) { return true, nil }, want: handoff.Ready},
		"false leaves it without Ready":       {ready: func(*unstructured.Unstructured) (bool, error) { return false, nil }, want: handoff.Unknown},
		"an error is returned, set not Ready": {ready: func(*unstructured.Unstructured) (bool, error) { return true, errProbe }, want: handoff.Unknown, wantErr: errProbe},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			w.Controller.ReadyAfter = 1
			calls := 0
			w.Controller.ReadyWhen = func(_ context.Context, s *unstructured.Unstructured) (bool, error) {
				calls++
				return tc.ready(s)
			}
			d := w.Desire("v1", []string{"static"}, handofftest.Pipelines("tekton-pipelines", "v1"))
			if _, err := w.Executor.Step(ctx, d); err != nil {
				t.Fatal(err)
			}
			err := w.Controller.Reconcile(ctx)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Reconcile: got %v, want %v", err, tc.wantErr)
			}
			if calls != 1 {
				t.Errorf("ReadyWhen called %d times, want 1", calls)
			}
			if got := readiness(t, w)["static"]; got != tc.want {
				t.Errorf("static set readiness %s, want %s", got, tc.want)
			}
		})
	}
}

// Labels and annotations other controllers add to an installed resource
// (the deployment controller's revision annotation) survive the set
// controller's apply, which then has nothing to write.
func TestSetControllerKeepsForeignMetadata(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	d := w.Desire("v1", []string{"static"}, handofftest.Pipelines("tekton-pipelines", "v1"))
	if _, err := w.Converge(ctx, d, 20); err != nil {
		t.Fatal(err)
	}
	key := handofftest.Key{Kind: "ConfigMap", Namespace: "tekton-pipelines", Name: "config-00"}
	cms := w.Cluster.ClientFor("other").Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(key.Namespace)
	patch := `{"metadata":{"labels":{"other":"x"},"annotations":{"other.example.com/revision":"7"}}}`
	if _, err := cms.Patch(ctx, key.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	n := len(w.Cluster.Writes())
	if err := w.Controller.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, wr := range w.Cluster.Writes()[n:] {
		if wr.Key == key {
			t.Errorf("the controller wrote %s again: %v", key, wr)
		}
	}
	o, _ := w.Cluster.Get(key)
	if o.GetLabels()["other"] != "x" || o.GetAnnotations()["other.example.com/revision"] != "7" {
		t.Errorf("foreign metadata lost: labels %v, annotations %v", o.GetLabels(), o.GetAnnotations())
	}
	if o.GetLabels()["app.kubernetes.io/version"] != "v1" {
		t.Errorf("the manifest's labels lost: %v", o.GetLabels())
	}
}
