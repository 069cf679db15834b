package handofftest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
