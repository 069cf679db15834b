package handofftest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var errLost = apierrors.NewTimeoutError("response lost", 0)

func TestFailNth(t *testing.T) {
	// The calls: a creates x1, b creates y1, a creates x2, b creates y2.
	calls := []struct{ actor, name string }{{"a", "x1"}, {"b", "y1"}, {"a", "x2"}, {"b", "y2"}}
	tests := map[string]struct {
		n      int
		mode   Mode
		actors []string
		// failed is the index of the call that fails.
		failed int
		// applied says whether the failed call took effect.
		applied bool
	}{
		"the third call of all, before commit": {n: 3, mode: BeforeCommit, failed: 2},
		"the third call of all, after commit":  {n: 3, mode: AfterCommit, failed: 2, applied: true},
		"the second call of b":                 {n: 2, mode: BeforeCommit, actors: []string{"b"}, failed: 3},
		"the first call of a or b":             {n: 1, mode: AfterCommit, actors: []string{"a", "b"}, failed: 0, applied: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.InjectFaults(FailNth(tt.n, tt.mode, errLost), tt.actors...)
			for i, call := range calls {
				_, err := c.ClientFor(call.actor).Resource(cmGVR).Namespace("ns").Create(context.Background(), configMap("ns", call.name), metav1.CreateOptions{})
				wantErr := i == tt.failed
				if (err != nil) != wantErr {
					t.Errorf("call %d (%s): err = %v, want error %v", i+1, call.name, err, wantErr)
				}
				if wantErr && !errors.Is(err, errLost) {
					t.Errorf("call %d: err = %v, want the injected error", i+1, err)
				}
				wantExists := !wantErr || tt.applied
				if got := c.Exists(cmKey(call.name)); got != wantExists {
					t.Errorf("call %d (%s): exists = %v, want %v", i+1, call.name, got, wantExists)
				}
			}
			var injected []int
			for i, a := range c.Actions() {
				if a.Injected {
					injected = append(injected, i)
				}
			}
			if diff := cmp.Diff([]int{tt.failed}, injected); diff != "" {
				t.Errorf("injected actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailNthDefaultError(t *testing.T) {
	c := newCluster(t)
	c.InjectFaults(FailNth(1, BeforeCommit, nil))
	_, err := c.Dynamic().Resource(setGVR).Get(context.Background(), "x", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) {
		t.Errorf("got %v, want an internal error", err)
	}
}

// A lost response to an update leaves the caller with a stale
// resourceVersion: its retry conflicts, as against a real server.
func TestAfterCommitUpdate(t *testing.T) {
	c := newCluster(t)
	ri := c.Dynamic().Resource(setGVR)
	set := create(t, ri, installerSet("set"))
	c.InjectFaults(FailNth(1, AfterCommit, errLost))
	in := set.DeepCopy()
	in.SetLabels(map[string]string{"v": "2"})
	if _, err := ri.Update(context.Background(), in, metav1.UpdateOptions{}); !errors.Is(err, errLost) {
		t.Fatalf("update: %v, want the lost response", err)
	}
	stored, _ := c.Get(setKey("set"))
	if stored.GetLabels()["v"] != "2" {
		t.Error("the update did not take effect")
	}
	if _, err := ri.Update(context.Background(), in, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("retry: %v, want Conflict", err)
	}
}

func TestRandomFaults(t *testing.T) {
	type result struct{ Get, Create, Update, Delete string }
	run := func(t *testing.T, f FaultFunc) (result, bool) {
		c := newCluster(t)
		ri := c.Dynamic().Resource(setGVR)
		set := create(t, ri, installerSet("set"))
		c.InjectFaults(f)
		var r result
		_, err := ri.Get(context.Background(), "set", metav1.GetOptions{})
		r.Get = errKind(err)
		_, err = ri.Create(context.Background(), installerSet("new"), metav1.CreateOptions{})
		r.Create = errKind(err)
		_, err = ri.Patch(context.Background(), "set", types.MergePatchType, []byte(`{"spec":{"x":1}}`), metav1.PatchOptions{})
		r.Update = errKind(err)
		r.Delete = errKind(ri.Delete(context.Background(), "set", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(set.GetUID())}}))
		return r, c.Exists(setKey("new"))
	}
	tests := map[string]struct {
		rate       float64
		kinds      []FaultKind
		want       result
		wantNewSet bool
	}{
		"rate 0 never fails":           {rate: 0, wantNewSet: true},
		"server errors hit every verb": {rate: 1, kinds: []FaultKind{FaultServerError}, want: result{"500", "500", "500", "500"}},
		"conflicts hit only writes other than create": {
			rate: 1, kinds: []FaultKind{FaultConflict},
			want: result{"", "", "Conflict", "Conflict"}, wantNewSet: true,
		},
		"throttling": {rate: 1, kinds: []FaultKind{FaultTooManyRequests}, want: result{"429", "429", "429", "429"}},
		"timeouts after commit take effect": {
			rate: 1, kinds: []FaultKind{FaultTimeoutAfterCommit},
			want: result{"504", "504", "504", "504"}, wantNewSet: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, newSet := run(t, RandomFaults(1, tt.rate, tt.kinds...))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if newSet != tt.wantNewSet {
				t.Errorf("new set exists = %v, want %v", newSet, tt.wantNewSet)
			}
		})
	}
}

func TestRandomFaultsAreReproducible(t *testing.T) {
	pattern := func(seed int64) string {
		f := RandomFaults(seed, 0.3)
		var s []byte
		for i := range 200 {
			verb := []string{"get", "list", "create", "update", "patch", "delete"}[i%6]
			fault := f(Call{Verb: verb, Resource: cmGVR, Namespace: "ns", Name: fmt.Sprint(i)})
			switch {
			case fault.Err == nil:
				s = append(s, '.')
			case fault.Mode == AfterCommit:
				s = append(s, 'A')
			default:
				s = append(s, 'B')
			}
		}
		return string(s)
	}
	a := pattern(42)
	if a != pattern(42) {
		t.Error("the same seed gave different faults")
	}
	if a == pattern(43) {
		t.Error("different seeds gave the same faults")
	}
	for _, ch := range []byte{'.', 'A', 'B'} {
		if !contains(a, ch) {
			t.Errorf("pattern %s has no %q", a, ch)
		}
	}
}

func contains(s string, ch byte) bool {
	for i := range len(s) {
		if s[i] == ch {
			return true
		}
	}
	return false
}

func TestInjectFaults(t *testing.T) {
	c := newCluster(t)
	var mu sync.Mutex
	var seen []Call
	c.InjectFaults(func(call Call) Fault {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, call)
		if call.Verb == "delete" {
			return Fault{Err: apierrors.NewTooManyRequests("slow down", 1)}
		}
		return Fault{}
	}, "executor")
	exec := c.ClientFor("executor")
	create(t, exec.Resource(setGVR), installerSet("set"))
	if _, err := exec.Resource(setGVR).UpdateStatus(context.Background(), withPhase(installerSet("set"), "x"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := exec.Resource(setGVR).Delete(context.Background(), "set", metav1.DeleteOptions{}); !apierrors.IsTooManyRequests(err) {
		t.Errorf("delete: %v, want TooManyRequests", err)
	}
	if err := c.ClientFor("other").Resource(setGVR).Delete(context.Background(), "set", metav1.DeleteOptions{}); err != nil {
		t.Errorf("another actor's delete: %v", err)
	}
	want := []Call{
		{Actor: "executor", Verb: "create", Resource: setGVR, Name: "set"},
		{Actor: "executor", Verb: "update", Resource: setGVR, Subresource: "status", Name: "set"},
		{Actor: "executor", Verb: "delete", Resource: setGVR, Name: "set"},
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("calls seen (-want +got):\n%s", diff)
	}

	c.DisableFaults()
	create(t, exec.Resource(setGVR), installerSet("set"))
	if err := exec.Resource(setGVR).Delete(context.Background(), "set", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete after DisableFaults: %v", err)
	}
}
