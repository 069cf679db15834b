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

// A set controller working from a list of the family read before the
// upgrade began (a lagging informer cache) still sees the old sets as not
// superseded; it must not write the old release back over what the new
// generation wrote. Guard.MayWrite tells who wrote an object by its
// controller ownerReference, so this holds for the owned kinds; the
// unowned ones (CRDs, Namespaces, webhook configurations, APIServices)
// carry no such mark and rely on MayApply alone.
func TestSetControllerStaleListDoesNotRevert(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	roles := []string{"static", "deployment"}
	v1 := w.Desire("v1", roles, handofftest.Pipelines("tekton-pipelines", "v1"))
	if _, err := w.Converge(ctx, v1, 30); err != nil {
		t.Fatal(err)
	}
	sets := w.Cluster.Dynamic().Resource(handofftest.SetResource)
	stale, err := sets.List(ctx, metav1.ListOptions{LabelSelector: w.Family.LabelSelector().String()})
	if err != nil {
		t.Fatal(err)
	}
	v2 := w.Desire("v2", roles, handofftest.Pipelines("tekton-pipelines", "v2"))
	for range 3 {
		if _, err := w.Round(ctx, v2); err != nil {
			t.Fatal(err)
		}
	}
	key := handofftest.Key{Kind: "ConfigMap", Namespace: "tekton-pipelines", Name: "config-00"}
	if o, _ := w.Cluster.Get(key); o.GetLabels()["app.kubernetes.io/version"] != "v2" {
		t.Fatalf("%s not yet written by v2: the test shows nothing", key)
	}

	lagging := *w.Controller
	lagging.Client = w.Cluster.ClientFor("lagging")
	lagging.List = func(context.Context) (*unstructured.UnstructuredList, error) { return stale.DeepCopy(), nil }
	n := len(w.Cluster.Writes())
	if err := lagging.Reconcile(ctx); err != nil {
		t.Logf("lagging pass: %v", err)
	}
	v2Lists := map[handofftest.Key]bool{}
	for _, r := range v2.Roles {
		for _, ref := range r.Resources {
			v2Lists[handofftest.Key{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}] = true
		}
	}
	unowned := map[schema.GroupKind]bool{}
	for _, gk := range w.Controller.Unowned {
		unowned[gk] = true
	}
	for _, wr := range w.Cluster.Writes()[n:] {
		if wr.Actor == "lagging" && v2Lists[wr.Key] && !unowned[schema.GroupKind{Group: wr.Key.Group, Kind: wr.Key.Kind}] {
			t.Errorf("the lagging controller wrote %s, which v2 already wrote", wr.Key)
		}
	}
	if o, _ := w.Cluster.Get(key); o.GetLabels()["app.kubernetes.io/version"] != "v2" {
		t.Errorf("%s reverted to %s", key, o.GetLabels()["app.kubernetes.io/version"])
	}
}
