package handofftest_test

import (
	"context"
	"maps"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
)

func TestGateCheck(t *testing.T) {
	set := func(name, gen, role string, ready, deleting bool) handoff.Set {
		s := handoff.Set{Name: name, Generation: gen, Role: role, Deleting: deleting, Readiness: handoff.Readiness{State: handoff.NotReady}}
		if ready {
			s.Readiness.State = handoff.Ready
		}
		return s
	}
	v2 := handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}, {Name: "deployment"}}}
	old := []handoff.Set{set("a1", "v1", "static", true, false), set("b1", "v1", "deployment", true, false)}
	invalid := func(s handoff.Set) handoff.Set {
		s.Invalid = &handoff.SetError{Name: s.Name, Err: handoff.ErrInvalidSet}
		return s
	}
	for name, tc := range map[string]struct {
		rounds  [][]handoff.Set // the sets before the first round, then after each round
		wantErr bool            // from the last round
	}{
		"old set retired in the first round, nothing desired Ready": {
			rounds:  [][]handoff.Set{old, {old[0], set("b1", "v1", "deployment", true, true), set("a2", "v2", "static", false, false)}},
			wantErr: true,
		},
		"a desired set that cannot be read whole is not Ready": {
			rounds: [][]handoff.Set{append(old, set("a2", "v2", "static", true, false), invalid(set("b2", "v2", "deployment", true, false))),
				{old[0], set("a2", "v2", "static", true, false), invalid(set("b2", "v2", "deployment", true, false))}},
			wantErr: true,
		},
		"a set that cannot be read whole is watched as old": {
			rounds:  [][]handoff.Set{append(old, invalid(set("x", "", "", false, false))), old},
			wantErr: true,
		},
		"old set retired while a desired set is not Ready": {
			rounds:  [][]handoff.Set{append(old, set("a2", "v2", "static", true, false), set("b2", "v2", "deployment", false, false)), {old[0], set("b1", "v1", "deployment", true, true)}},
			wantErr: true,
		},
		"old set vanished while a desired set is not Ready": {
			rounds:  [][]handoff.Set{append(old, set("a2", "v2", "static", false, false)), {old[0]}},
			wantErr: true,
		},
		"old sets retired once every desired role is Ready": {
			rounds: [][]handoff.Set{append(old, set("a2", "v2", "static", true, false), set("b2", "v2", "deployment", true, false)),
				{set("a1", "v1", "static", true, true), set("a2", "v2", "static", true, false), set("b2", "v2", "deployment", true, false)}},
		},
		"a set of a role the desired generation drops counts as old": {
			rounds:  [][]handoff.Set{{set("a2", "v2", "static", true, false), set("c2", "v2", "extra", true, false)}, {set("a2", "v2", "static", true, false)}},
			wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var g handofftest.Gate
			var err error
			for i, sets := range tc.rounds {
				err = g.Check(sets, v2)
				if i < len(tc.rounds)-1 && err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("last round: error %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// Observe reads every set of the family on the cluster, those that cannot
// be read whole included, without failing on them.
func TestGateObserveUnreadableSet(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	v1 := w.Desire("v1", []string{"static"}, handofftest.Pipelines("tekton-pipelines", "v1"))
	if _, err := w.Converge(ctx, v1, 30); err != nil {
		t.Fatal(err)
	}
	lbls := maps.Clone(w.Family.Selector)
	lbls[w.Family.GenerationLabel] = "v0" // no role
	if err := w.Cluster.Add(handofftest.Object("operator.tekton.dev/v1alpha1", "TektonInstallerSet", "", "unreadable", lbls, nil)); err != nil {
		t.Fatal(err)
	}
	var g handofftest.Gate
	for round := range 2 {
		if err := g.Observe(w.Cluster, w.Family, *v1); err != nil {
			t.Errorf("observation %d: %v", round, err)
		}
	}
}
