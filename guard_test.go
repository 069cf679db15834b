package handoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestGuardMayApply(t *testing.T) {
	shared := prCM("config-defaults")
	oldOnly := prCM("config-v1-only")
	dep := prDeploy
	oldStatic := prSet("static-v1", "v1", "static", 1, shared, oldOnly, prHook)
	oldDeploy := prSet("deployment-v1", "v1", "deployment", 2, dep, prSvc)
	newStatic := prSet("static-v2", "v2", "static", 10, shared, prHook)
	newDeploy := prSet("deployment-v2", "v2", "deployment", 11, dep)
	sup := func(s handoff.Set, gen string) handoff.Set { s.SupersededBy = gen; return s }
	all := func(sets ...handoff.Set) []handoff.Set { return sets }

	type answer struct {
		OK     bool
		Reason string
	}
	claimed := func(r handoff.Ref, by, gen string) answer {
		return answer{false, r.String() + " is claimed by " + by + " of generation " + gen}
	}
	yes := answer{true, ""}
	tests := []struct {
		name   string
		set    handoff.Set
		family []handoff.Set
		r      handoff.Ref
		want   answer
	}{{
		name:   "old set superseded by a live newer set: a resource the new set lists is claimed",
		set:    sup(oldStatic, "v2"),
		family: all(sup(oldStatic, "v2"), sup(oldDeploy, "v2"), newStatic, newDeploy),
		r:      shared,
		want:   claimed(shared, "static-v2", "v2"),
	}, {
		name:   "old set superseded: the webhook configuration the new set lists is claimed",
		set:    sup(oldStatic, "v2"),
		family: all(sup(oldStatic, "v2"), newStatic),
		r:      prHook,
		want:   claimed(prHook, "static-v2", "v2"),
	}, {
		name:   "a claim comes from any role of the superseding generation",
		set:    sup(prSet("statefulset-v1", "v1", "statefulset", 3, dep), "v2"),
		family: all(sup(oldDeploy, "v2"), newStatic, newDeploy),
		r:      dep,
		want:   claimed(dep, "deployment-v2", "v2"),
	}, {
		name:   "old set superseded: a resource the newer generation does not list is still its own",
		set:    sup(oldStatic, "v2"),
		family: all(sup(oldStatic, "v2"), newStatic, newDeploy),
		r:      oldOnly,
		want:   yes,
	}, {
		name:   "old set superseded before the new sets exist: everything is still its own",
		set:    sup(oldStatic, "v2"),
		family: all(sup(oldStatic, "v2"), sup(oldDeploy, "v2")),
		r:      shared,
		want:   yes,
	}, {
		name:   "the new set writes what it lists",
		set:    newStatic,
		family: all(sup(oldStatic, "v2"), newStatic),
		r:      shared,
		want:   yes,
	}, {
		name:   "rollback: mark removed, the old set writes the shared resource again",
		set:    oldStatic,
		family: all(oldStatic, oldDeploy, newStatic, newDeploy),
		r:      shared,
		want:   yes,
	}, {
		name:   "the superseding set is deleting: its claim is void",
		set:    sup(oldStatic, "v2"),
		family: all(sup(oldStatic, "v2"), prDeleting(newStatic)),
		r:      shared,
		want:   yes,
	}, {
		name:   "a set of another generation than the one named in the mark does not claim",
		set:    sup(oldStatic, "v3"),
		family: all(sup(oldStatic, "v3"), newStatic),
		r:      shared,
		want:   yes,
	}, {
		name: "a sibling of the old generation does not claim",
		set:  sup(prSet("statefulset-v1", "v1", "statefulset", 3, dep), "v2"),
		family: all(sup(prSet("statefulset-v1", "v1", "statefulset", 3, dep), "v2"),
			sup(oldDeploy, "v2"), newStatic),
		r:    dep,
		want: yes,
	}, {
		name:   "a deleting set writes nothing",
		set:    prDeleting(oldStatic),
		family: all(prDeleting(oldStatic)),
		r:      oldOnly,
		want:   answer{false, "set static-v1 is being deleted"},
	}, {
		name:   "a deleting superseded set writes nothing, even what no one claims",
		set:    prDeleting(sup(oldStatic, "v2")),
		family: all(prDeleting(sup(oldStatic, "v2")), newStatic),
		r:      oldOnly,
		want:   answer{false, "set static-v1 is being deleted"},
	}, {
		name:   "the identity is version-insensitive: a claim needs only GroupKind and namespace/name",
		set:    sup(oldDeploy, "v2"),
		family: all(newDeploy),
		r:      handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: prNS, Name: "tekton-pipelines-controller"},
		want:   claimed(dep, "deployment-v2", "v2"),
	}, {
		name:   "same name in another namespace is not claimed",
		set:    sup(oldDeploy, "v2"),
		family: all(newDeploy),
		r:      handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: "other", Name: "tekton-pipelines-controller"},
		want:   yes,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := handoff.NewGuard(tc.set, tc.family).MayApply(tc.r)
			if d := cmp.Diff(tc.want, answer{ok, reason}); d != "" {
				t.Errorf("Guard.MayApply (-want +got):\n%s", d)
			}
			if got := handoff.MayApply(tc.set, tc.r, tc.family); got != tc.want.OK {
				t.Errorf("MayApply = %v, want %v", got, tc.want.OK)
			}
		})
	}
}

// Over one upgrade and its rollback, the old static set's answer for the
// shared ConfigMap follows the superseded mark and the new set's life.
func TestGuardMayApplyAcrossUpgradeAndRollback(t *testing.T) {
	shared := prCM("config-defaults")
	old := prSet("static-v1", "v1", "static", 1, shared)
	next := prSet("static-v2", "v2", "static", 10, shared)
	type check struct {
		set  handoff.Set
		want bool
	}
	stages := []struct {
		name   string
		family []handoff.Set
		checks []check
	}{
		{"steady v1", []handoff.Set{old}, []check{{old, true}}},
		{"v1 marked superseded, v2 not yet created", []handoff.Set{prSuperseded(old)}, []check{{prSuperseded(old), true}}},
		{"v2 created", []handoff.Set{prSuperseded(old), next}, []check{{prSuperseded(old), false}, {next, true}}},
		{"rollback: mark removed, v2 still there", []handoff.Set{old, next}, []check{{old, true}, {next, true}}},
		{"rollback: v2 deleting", []handoff.Set{old, prDeleting(next)}, []check{{old, true}, {prDeleting(next), false}}},
	}
	for _, st := range stages {
		for _, c := range st.checks {
			if got := handoff.MayApply(c.set, shared, st.family); got != c.want {
				t.Errorf("%s: %s MayApply = %v, want %v", st.name, c.set.Name, got, c.want)
			}
		}
	}
}

// withObject gives a hand-built set the object Family.Observe would keep,
// of tektoncd/operator's set kind.
func withObject(s handoff.Set) handoff.Set {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.tekton.dev/v1alpha1", "kind": "TektonInstallerSet"}}
	u.SetName(s.Name)
	u.SetUID(s.UID)
	s.Object = u
	return s
}

// liveObj is a live object of r whose controller is owner.
func liveObj(r handoff.Ref, owner *metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": schema.GroupVersion{Group: r.Group, Version: "v1"}.String(), "kind": r.Kind}}
	u.SetNamespace(r.Namespace)
	u.SetName(r.Name)
	if owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
	return u
}

func TestGuardMayWrite(t *testing.T) {
	shared := prCM("config-defaults")
	oldStatic := withObject(prSet("static-v1", "v1", "static", 1, shared))
	newStatic := withObject(prSet("static-v2", "v2", "static", 10, shared))
	sibling := withObject(prSet("static-v1-dup", "v1", "static", 2, shared))
	ctrl := func(s handoff.Set) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: s.Name, UID: s.UID, Controller: ptr.To(true)}
	}
	type answer struct {
		OK     bool
		Reason string
	}
	yes := answer{true, ""}
	tests := []struct {
		name   string
		set    handoff.Set
		family []handoff.Set
		owner  *metav1.OwnerReference
		writer handoff.Set // the set whose Stamp the object carries, if any
		want   answer
	}{{
		name: "no controller yet", set: oldStatic, family: []handoff.Set{oldStatic}, want: yes,
	}, {
		name: "controlled by the set itself", set: oldStatic, family: []handoff.Set{oldStatic}, owner: ctrl(oldStatic), want: yes,
	}, {
		name: "the new set takes over from the superseded old one", set: newStatic,
		family: []handoff.Set{prSuperseded(oldStatic), newStatic}, owner: ctrl(oldStatic), want: yes,
	}, {
		name: "the new set takes over from a deleting set", set: newStatic,
		family: []handoff.Set{prDeleting(oldStatic), newStatic}, owner: ctrl(oldStatic), want: yes,
	}, {
		name: "a stale view: the old set, not yet superseded in it, finds the object controlled by a set it does not know",
		set:  oldStatic, family: []handoff.Set{oldStatic}, owner: ctrl(newStatic),
		want: answer{false, shared.String() + " was written by set static-v2 (uid uid-static-v2), newer than this view of the family"},
	}, {
		name: "a live, not superseded set keeps what it controls", set: sibling,
		family: []handoff.Set{oldStatic, sibling}, owner: ctrl(oldStatic),
		want: answer{false, shared.String() + " was written by set static-v1 of generation v1, which this set does not supersede"},
	}, {
		name: "controlled by another kind of object: not the guard's to decide", set: oldStatic, family: []handoff.Set{oldStatic},
		owner: &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "x", UID: "uid-x", Controller: ptr.To(true)}, want: yes,
	}, {
		name: "an owner that is not the controller does not count", set: oldStatic, family: []handoff.Set{oldStatic},
		owner: &metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: "static-v2", UID: "uid-static-v2"}, want: yes,
	}, {
		// Issue 13, item 5: each would take the object from the other on
		// every pass, rewriting its controller back and forth.
		name: "superseded siblings leave each other's objects alone", set: prSuperseded(sibling),
		family: []handoff.Set{prSuperseded(oldStatic), prSuperseded(sibling)}, owner: ctrl(oldStatic),
		want: answer{false, shared.String() + " was written by set static-v1 of generation v1, which this set does not supersede"},
	}, {
		name: "a released set takes back what the superseded newer set wrote", set: oldStatic,
		family: []handoff.Set{oldStatic, prSuperseded(newStatic)}, owner: ctrl(newStatic), want: yes,
	}, {
		// Issue 13, item 9: an object installed without an owner carries
		// the writer's mark instead.
		name: "no owner, written by a set a stale view does not know", set: oldStatic,
		family: []handoff.Set{oldStatic}, writer: newStatic,
		want: answer{false, shared.String() + " was written by set uid-static-v2 (uid uid-static-v2), newer than this view of the family"},
	}, {
		name: "no owner, written by the live newer set", set: oldStatic,
		family: []handoff.Set{oldStatic, newStatic}, writer: newStatic,
		want: answer{false, shared.String() + " was written by set static-v2 of generation v2, which this set does not supersede"},
	}, {
		name: "no owner, written by an older set that is gone: the object is not locked", set: newStatic,
		family: []handoff.Set{newStatic}, writer: oldStatic, want: yes,
	}, {
		name: "no owner, written by the set itself", set: oldStatic, family: []handoff.Set{oldStatic}, writer: oldStatic, want: yes,
	}, {
		name: "no owner, written by the superseded old set: the new one takes it", set: newStatic,
		family: []handoff.Set{prSuperseded(oldStatic), newStatic}, writer: oldStatic, want: yes,
	}, {
		name: "MayApply's claim still holds", set: prSuperseded(oldStatic),
		family: []handoff.Set{prSuperseded(oldStatic), newStatic}, owner: ctrl(oldStatic),
		want: answer{false, shared.String() + " is claimed by static-v2 of generation v2"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := liveObj(shared, tc.owner)
			if tc.writer.UID != "" {
				handoff.NewGuard(tc.writer, tc.family).Stamp(live)
				want := string(tc.writer.UID) + "@" + tc.writer.Created.UTC().Format(time.RFC3339) + "#0"
				if got := live.GetAnnotations()[handoff.WriterAnnotation]; got != want {
					t.Fatalf("Stamp wrote %q, want the writer's UID, creation time and generation (none: no object) %q", got, want)
				}
			}
			ok, reason := handoff.NewGuard(tc.set, tc.family).MayWrite(live)
			if d := cmp.Diff(tc.want, answer{ok, reason}); d != "" {
				t.Errorf("Guard.MayWrite (-want +got):\n%s", d)
			}
		})
	}
}

// A set controller whose view of the family was read before the upgrade
// began (an informer cache that lags behind the executor) still reconciles
// the old set as not superseded. MayApply, asked from that view, lets it
// write; MayWrite, shown the live object the new set already wrote, does
// not.
func TestGuardMayWriteStaleView(t *testing.T) {
	ctx := context.Background()
	w, _, v2 := newSmall(t)
	list := func() []handoff.Set {
		t.Helper()
		l, err := w.Cluster.Dynamic().Resource(w.Family.Resource).List(ctx, metav1.ListOptions{LabelSelector: w.Family.LabelSelector().String()})
		if err != nil {
			t.Fatal(err)
		}
		sets, err := w.Family.ObserveAll(l.Items)
		if err != nil {
			t.Fatal(err)
		}
		return sets
	}
	stale := list()
	for range 2 { // the executor supersedes v1 and creates v2; v2's controller applies it
		if _, err := w.Round(ctx, v2); err != nil {
			t.Fatal(err)
		}
	}
	key := handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "config-a"}
	live, ok := w.Cluster.Get(key)
	if !ok {
		t.Fatalf("%s missing", key)
	}
	newStatic := w.Family.SetName("v2", "static")
	if c := metav1.GetControllerOf(live); c == nil || c.Name != newStatic {
		t.Fatalf("%s controlled by %v, want %s: the race needs v2 to have written it", key, c, newStatic)
	}
	var old handoff.Set
	for _, s := range stale {
		if s.Generation == "v1" && s.Role == "static" {
			old = s
		}
	}
	g := handoff.NewGuard(old, stale)
	if ok, _ := g.MayApply(handoff.RefOf(live)); !ok {
		t.Fatal("MayApply refused from the stale view; the test shows nothing")
	}
	if ok, reason := g.MayWrite(live); ok {
		t.Errorf("MayWrite lets the old set write back what %s wrote", newStatic)
	} else {
		t.Log(reason)
	}
}

// A pass whose view lags must not give an object back to a set that
// released it when it retired, nor revert what the same set wrote for a
// newer generation of its spec (both found by the model-based test).
func TestGuardMayWriteLaggingPassOfTheSameSet(t *testing.T) {
	shared := prCM("config-defaults")
	at := func(s handoff.Set, generation int64) handoff.Set {
		s = withObject(s)
		s.Object.SetGeneration(generation)
		return s
	}
	old := at(prSet("static-v1", "v1", "static", 1, shared), 1)
	oldUpdated := at(prSet("static-v1", "v1", "static", 1, shared), 2) // the same set, its spec updated
	next := at(prSet("static-v2", "v2", "static", 10, shared), 1)
	ctrl := func(s handoff.Set) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: s.Name, UID: s.UID, Controller: ptr.To(true)}
	}
	tests := map[string]struct {
		set      handoff.Set
		family   []handoff.Set
		owner    *metav1.OwnerReference
		writer   handoff.Set
		released string
		want     bool
	}{
		"released from this set: refused, though the view shows it live and the writer superseded": {
			set: old, family: []handoff.Set{old, prSuperseded(next)}, owner: ctrl(next), writer: next,
			released: string(old.UID) + ",uid-older",
		},
		"released from other sets only: the usual rules": {
			set: old, family: []handoff.Set{old, prSuperseded(next)}, owner: ctrl(next), writer: next,
			released: "uid-older", want: true,
		},
		"written by this set for a newer generation of its spec: refused": {
			set: old, family: []handoff.Set{old}, owner: ctrl(old), writer: oldUpdated,
		},
		"written by this set for the generation the view holds": {
			set: oldUpdated, family: []handoff.Set{oldUpdated}, owner: ctrl(old), writer: old, want: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			live := liveObj(shared, tc.owner)
			handoff.NewGuard(tc.writer, tc.family).Stamp(live)
			if tc.released != "" {
				ann := live.GetAnnotations()
				ann[handoff.ReleasedAnnotation] = tc.released
				live.SetAnnotations(ann)
			}
			ok, reason := handoff.NewGuard(tc.set, tc.family).MayWrite(live)
			if ok != tc.want {
				t.Errorf("MayWrite = %v (%s), want %v", ok, reason, tc.want)
			}
		})
	}
}
