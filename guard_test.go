package handoff_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
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
