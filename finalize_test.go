package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

const finActor = "finalizer"

func finSetKey(w *handofftest.World, gen, role string) handofftest.Key {
	return handofftest.Key{Group: "operator.tekton.dev", Kind: "TektonInstallerSet", Name: w.Family.SetName(gen, role)}
}

// finUpgradeStarted installs v1 and runs one executor step of the upgrade
// to v2, which creates the v2 static set; the set controller has not yet
// reconciled it, so the shared resources are still owned by the v1 static
// set. It returns the world, an executor acting as finActor, and the v1
// and v2 static sets.
func finUpgradeStarted(t *testing.T) (w *handofftest.World, e *handoff.Executor, old, succ *unstructured.Unstructured) {
	t.Helper()
	w, _, v2 := newSmall(t)
	if _, err := w.Executor.Step(context.Background(), v2); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if old, ok = w.Cluster.Get(finSetKey(w, "v1", "static")); !ok {
		t.Fatal("no v1 static set")
	}
	if succ, ok = w.Cluster.Get(finSetKey(w, "v2", "static")); !ok {
		t.Fatal("no v2 static set")
	}
	fin := *w.Executor
	fin.Dynamic = w.Cluster.ClientFor(finActor)
	return w, &fin, old, succ
}

var (
	finNamespace = handofftest.Key{Kind: "Namespace", Name: testNS}
	finConfigA   = handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "config-a"}
	finConfigB   = handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "config-b"}
	finObsolete  = handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "config-only-v1"}
	finWebhook   = handofftest.Key{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "validation.webhook"}
	// finKept are the v1 static resources the v2 static set also lists.
	finKept = []handofftest.Key{finNamespace, finConfigA, finConfigB, finWebhook}
	// finHanded are those of finKept the v1 static set owns.
	finHanded = []handofftest.Key{finConfigA, finConfigB}
)

// finStrip drops what a handover may change: the ownerReferences and the
// resourceVersion.
// finStrip leaves out what a handover writes: the owners, the mark of the
// set released (checked by finReleased) and the resourceVersion.
func finStrip(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	c.SetOwnerReferences(nil)
	c.SetResourceVersion("")
	ann := c.GetAnnotations()
	delete(ann, handoff.ReleasedAnnotation)
	c.SetAnnotations(ann)
	return c.Object
}

type finCall struct {
	Verb, Name string
	Injected   bool
}

func finCalls(c *handofftest.Cluster, actor string) []finCall {
	var out []finCall
	for _, a := range c.Actions() {
		if a.Actor != actor {
			continue
		}
		name := ""
		if n, ok := a.Action.(interface{ GetName() string }); ok {
			name = n.GetName()
		}
		out = append(out, finCall{a.GetVerb(), name, a.Injected})
	}
	return out
}

// finCheckDone checks the end state of finalizing the v1 static set: every
// kept resource has lived without a break and, if it was owned by v1,
// is now owned by the v2 static set alone with nothing else changed; the
// obsolete ConfigMap, owned by v1 alone, is still there; and deleting the
// v1 set for good (the garbage collector runs) removes it and leaves every
// kept resource in place.
func finCheckDone(t *testing.T, w *handofftest.World, succ *unstructured.Unstructured, before map[handofftest.Key]*unstructured.Unstructured, label string) {
	t.Helper()
	check := func(when string) {
		for _, k := range finKept {
			tl := w.Cluster.Timeline(k)
			if len(tl) != 1 || !tl[0].To.IsZero() || !tl[0].Deleting.IsZero() {
				t.Errorf("%s %s: kept %s has lifetimes %+v, want one that has not ended", label, when, k, tl)
			}
		}
		if gone := !w.Cluster.Exists(finObsolete); gone != (when != "after Finalize") {
			t.Errorf("%s %s: obsolete %s gone: %v; the garbage collector deletes it with the set", label, when, finObsolete, gone)
		}
	}
	check("after Finalize")
	want := []metav1.OwnerReference{w.Family.OwnerReference(handoff.Set{Name: succ.GetName(), UID: succ.GetUID()})}
	for _, k := range finHanded {
		got, ok := w.Cluster.Get(k)
		if !ok {
			continue // reported by check
		}
		if d := cmp.Diff(want, got.GetOwnerReferences()); d != "" {
			t.Errorf("%s: %s ownerReferences (-want +got):\n%s", label, k, d)
		}
		if r := got.GetAnnotations()[handoff.ReleasedAnnotation]; r == "" || r == string(succ.GetUID()) {
			t.Errorf("%s: %s is marked released from %q, want the finalized set", label, k, r)
		}
		if d := cmp.Diff(finStrip(before[k]), finStrip(got)); d != "" {
			t.Errorf("%s: handover changed more of %s than its owners (-before +after):\n%s", label, k, d)
		}
	}
	// The v1 set goes away for good: its finalizer is dropped, the garbage
	// collector removes what it still owns.
	ctx := context.Background()
	sets := w.Cluster.ClientFor("test").Resource(handofftest.SetResource)
	name := finSetKey(w, "v1", "static").Name
	bg := metav1.DeletePropagationBackground
	if err := sets.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatalf("%s: delete v1 set: %v", label, err)
	}
	if _, err := sets.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("%s: drop finalizers: %v", label, err)
	}
	w.Cluster.CollectGarbage()
	if w.Cluster.Exists(finSetKey(w, "v1", "static")) {
		t.Fatalf("%s: v1 static set still exists", label)
	}
	check("after the v1 set is gone")
}

func finSnapshot(w *handofftest.World) map[handofftest.Key]*unstructured.Unstructured {
	out := map[handofftest.Key]*unstructured.Unstructured{}
	for _, k := range finKept {
		out[k], _ = w.Cluster.Get(k)
	}
	return out
}

// The calls one finalization makes, written from the rules: one List of
// the family; one List per scope (kind and namespace) of what the set
// lists, in the order the set lists them: the Namespace, the ConfigMaps of
// comp-ns, the webhook configurations; a handover patch for each kept
// resource the v1 set owns; then, as there are obsolete resources, a second
// List (of every set of the kind) that confirms no set listing them
// appeared meanwhile. The obsolete ConfigMap is the v1 set's alone: the
// garbage collector deletes it with the set, so no call is made for it.
var finWantCalls = []finCall{
	{Verb: "list"},                    // the family
	{Verb: "list"},                    // Namespaces
	{Verb: "list"},                    // ConfigMaps in comp-ns
	{Verb: "list"},                    // ValidatingWebhookConfigurations
	{Verb: "patch", Name: "config-a"}, // handover
	{Verb: "patch", Name: "config-b"}, // handover
	{Verb: "list"},                    // confirm before anything goes
}

func TestFinalizeCallsOfOneFinalization(t *testing.T) {
	w, e, old, succ := finUpgradeStarted(t)
	before := finSnapshot(w)
	w.Cluster.ClearActions()
	if _, err := e.Finalize(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(finWantCalls, finCalls(w.Cluster, finActor)); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	finCheckDone(t, w, succ, before, "no fault")
}

// A finalizer that fails at any API call, before or after the call took
// effect, and is run again (as a set controller requeues) finishes the job
// and never deletes a kept resource.
func TestFinalizeCrashAtEveryCall(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []handofftest.Mode{handofftest.BeforeCommit, handofftest.AfterCommit} {
		for i := 1; i <= len(finWantCalls); i++ {
			label := fmt.Sprintf("fail call %d (%s %s) %s", i, finWantCalls[i-1].Verb, finWantCalls[i-1].Name, mode)
			t.Run(label, func(t *testing.T) {
				w, e, old, succ := finUpgradeStarted(t)
				before := finSnapshot(w)
				w.Cluster.ClearActions()
				w.Cluster.InjectFaults(handofftest.FailNth(i, mode, nil), finActor)
				_, err := e.Finalize(ctx, old)
				if err == nil {
					t.Fatalf("first Finalize: no error, want the injected one")
				}
				if !finIsInternal(err) {
					t.Errorf("first Finalize error %v, want the injected InternalError", err)
				}
				res, err := e.Finalize(ctx, old)
				if err != nil {
					t.Fatalf("second Finalize: %v", err)
				}
				for _, it := range res.Deleted {
					if it.Ref.Name != finObsolete.Name {
						t.Errorf("second Finalize deleted %s", it.Ref)
					}
				}
				injected := 0
				for _, c := range finCalls(w.Cluster, finActor) {
					if c.Injected {
						injected++
					}
				}
				if injected != 1 {
					t.Errorf("%d injected faults, want 1", injected)
				}
				finCheckDone(t, w, succ, before, label)
			})
		}
	}
}

func finIsInternal(err error) bool {
	var re *handoff.ResourceError
	return errors.As(err, &re) && apierrors.IsInternalError(re.Err) || apierrors.IsInternalError(err)
}

// A 409 Conflict on the handover patch (of the object as the List read
// it) is retried with a fresh read and succeeds; before commit the retry patches again, after commit it finds
// the work done and stops.
func TestFinalizeHandoverConflictRetried(t *testing.T) {
	tests := []struct {
		mode handofftest.Mode
		want []finCall // the calls on config-a
	}{{
		mode: handofftest.BeforeCommit,
		want: []finCall{{"patch", "config-a", true}, {"get", "config-a", false}, {"patch", "config-a", false}},
	}, {
		mode: handofftest.AfterCommit,
		want: []finCall{{"patch", "config-a", true}, {"get", "config-a", false}},
	}}
	for _, tc := range tests {
		t.Run(tc.mode.String(), func(t *testing.T) {
			w, e, old, succ := finUpgradeStarted(t)
			before := finSnapshot(w)
			w.Cluster.ClearActions()
			conflicts := 0
			w.Cluster.InjectFaults(func(c handofftest.Call) handofftest.Fault {
				if c.Verb != "patch" || c.Name != "config-a" || conflicts > 0 {
					return handofftest.Fault{}
				}
				conflicts++
				return handofftest.Fault{Mode: tc.mode, Err: apierrors.NewConflict(c.Resource.GroupResource(), c.Name, errors.New("injected"))}
			}, finActor)
			res, err := e.Finalize(context.Background(), old)
			if err != nil {
				t.Fatalf("Finalize: %v", err)
			}
			if conflicts != 1 {
				t.Fatalf("%d conflicts injected, want 1", conflicts)
			}
			var got []finCall
			for _, c := range finCalls(w.Cluster, finActor) {
				if c.Name == "config-a" {
					got = append(got, c)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("calls on config-a (-want +got):\n%s", d)
			}
			if !slices.ContainsFunc(res.HandedOver, func(it handoff.Item) bool { return it.Ref.Name == "config-a" }) {
				t.Errorf("config-a not in HandedOver: %v", res.HandedOver)
			}
			finCheckDone(t, w, succ, before, tc.mode.String())
		})
	}
}

func TestFinalizeRejectsBadInput(t *testing.T) {
	setObj := func(labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.tekton.dev/v1alpha1", "kind": "TektonInstallerSet",
			"spec": map[string]any{"manifests": []any{mkObj("v1", "ConfigMap", testNS, "config-only-v1", "x").Object}}}}
		u.SetName("bad")
		u.SetUID("uid-bad")
		u.SetLabels(labels)
		return u
	}
	famLabels := func(gen string) map[string]string {
		return map[string]string{"operator.tekton.dev/created-by": "Comp", "operator.tekton.dev/type": "main",
			"operator.tekton.dev/release-version": gen, handoff.DefaultRoleLabel: "static"}
	}
	otherFamily := famLabels("v1")
	otherFamily["operator.tekton.dev/created-by"] = "Other"
	noGeneration := famLabels("")
	delete(noGeneration, "operator.tekton.dev/release-version")
	tests := []struct {
		name    string
		obj     func(w *handofftest.World) *unstructured.Unstructured
		family  func(f *handoff.Family)
		wantErr error
	}{{
		name:    "a set of another family",
		obj:     func(*handofftest.World) *unstructured.Unstructured { return setObj(otherFamily) },
		wantErr: handoff.ErrInvalidSet,
	}, {
		name:    "a set of the family without its generation label",
		obj:     func(*handofftest.World) *unstructured.Unstructured { return setObj(noGeneration) },
		wantErr: handoff.ErrInvalidSet,
	}, {
		name: "not a set: a ConfigMap",
		obj: func(w *handofftest.World) *unstructured.Unstructured {
			cm, _ := w.Cluster.Get(finObsolete)
			return cm
		},
		wantErr: handoff.ErrInvalidSet,
	}, {
		name: "not a set: a ConfigMap carrying the family's labels and a manifest list",
		obj: func(w *handofftest.World) *unstructured.Unstructured {
			u := setObj(famLabels("v1"))
			u.SetAPIVersion("v1")
			u.SetKind("ConfigMap")
			return u
		},
		wantErr: handoff.ErrInvalidSet,
	}, {
		name: "the v1 static set, but the executor's family has no set resource",
		obj: func(w *handofftest.World) *unstructured.Unstructured {
			u, _ := w.Cluster.Get(finSetKey(w, "v1", "static"))
			return u
		},
		family:  func(f *handoff.Family) { f.Resource.Resource = "" },
		wantErr: handoff.ErrInvalidFamily,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, e, _, _ := finUpgradeStarted(t)
			if tc.family != nil {
				tc.family(&e.Family)
			}
			obj := tc.obj(w)
			n := len(w.Cluster.Writes())
			w.Cluster.ClearActions()
			res, err := e.Finalize(context.Background(), obj)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Finalize error = %v, want one wrapping %v", err, tc.wantErr)
			}
			var se *handoff.SetError
			if tc.wantErr == handoff.ErrInvalidSet && (!errors.As(err, &se) || se.Name != obj.GetName()) {
				t.Errorf("Finalize error %v is not a *SetError naming %q", err, obj.GetName())
			}
			if d := cmp.Diff(handoff.FinalizeResult{}, res); d != "" {
				t.Errorf("result of a rejected Finalize (-want +got):\n%s", d)
			}
			if got := w.Cluster.Writes()[n:]; len(got) != 0 {
				t.Errorf("rejected Finalize wrote: %v", got)
			}
			if got := finCalls(w.Cluster, finActor); len(got) != 0 {
				t.Errorf("rejected Finalize made calls: %v", got)
			}
		})
	}
}
