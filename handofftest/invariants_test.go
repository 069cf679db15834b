package handofftest_test

import (
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
	for name, tc := range map[string]struct {
		rounds  [][]handoff.Set // the sets after each round
		wantErr bool            // from the last round
	}{
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
