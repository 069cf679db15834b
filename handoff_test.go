package handoff_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/types"
)

func mk(name, gen, role string, created int, state handoff.State) handoff.Set {
	return handoff.Set{Name: name, UID: types.UID("uid-" + name), Generation: gen, Role: role,
		Created: time.Date(2026, 1, 1, 0, 0, created, 0, time.UTC), Readiness: handoff.Readiness{State: state},
		Labels: family.Selector}
}

type step struct {
	Kind handoff.ActionKind
	Set  string
	Role string
}

func steps(p handoff.Plan) []step {
	var out []step
	for _, a := range p.Actions {
		out = append(out, step{a.Kind, a.Set, a.Role})
	}
	return out
}

func TestPlannerCases(t *testing.T) {
	two := &handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}, {Name: "deployment", After: []string{"static"}}}}
	sup := func(s handoff.Set) handoff.Set { s.SupersededBy = "v2"; return s }
	del := func(s handoff.Set) handoff.Set { s.Deleting = true; return s }
	hash := func(s handoff.Set, h string) handoff.Set { s.Hash = h; return s }
	foreign := mk("foreign", "v1", "static", 0, handoff.Ready)
	foreign.Labels = map[string]string{"operator.tekton.dev/created-by": "TektonTrigger", "operator.tekton.dev/type": "main"}
	sts := &handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}, {Name: "statefulset", After: []string{"static"}}}}
	hashed := &handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static", Hash: "b"}}}

	cases := map[string]struct {
		sets    []handoff.Set
		desired *handoff.Desired
		phase   handoff.Phase
		want    []step
	}{
		"nothing on the cluster creates the first role only": {
			desired: two, phase: handoff.PhaseInstall,
			want: []step{{handoff.ActionCreate, "", "static"}, {handoff.ActionWait, "", "deployment"}},
		},
		"static Ready lets deployment be created": {
			sets: []handoff.Set{mk("s2", "v2", "static", 1, handoff.Ready)}, desired: two, phase: handoff.PhaseInstall,
			want: []step{{handoff.ActionCreate, "", "deployment"}},
		},
		"upgrade creates beside the old generation and retires nothing": {
			sets:    []handoff.Set{mk("s1", "v1", "static", 1, handoff.Ready), mk("d1", "v1", "deployment", 2, handoff.Ready)},
			desired: two, phase: handoff.PhaseUpgrade,
			want: []step{{handoff.ActionSupersede, "s1", "static"}, {handoff.ActionSupersede, "d1", "deployment"},
				{handoff.ActionCreate, "", "static"}, {handoff.ActionWait, "", "deployment"}},
		},
		"duplicates keep the oldest and retire the rest": {
			sets: []handoff.Set{mk("s2-b", "v2", "static", 5, handoff.Ready), mk("s2-a", "v2", "static", 5, handoff.Ready),
				mk("s2-old", "v2", "static", 4, handoff.NotReady)},
			desired: &handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}}}, phase: handoff.PhaseInstall,
			want: []step{{handoff.ActionWait, "s2-old", "static"}, {handoff.ActionRetire, "s2-a", "static"}, {handoff.ActionRetire, "s2-b", "static"}},
		},
		"a desired set not Ready keeps the old generation untouched": {
			sets: []handoff.Set{sup(mk("s1", "v1", "static", 1, handoff.Ready)), sup(mk("d1", "v1", "deployment", 2, handoff.Ready)),
				mk("s2", "v2", "static", 3, handoff.Ready), mk("d2", "v2", "deployment", 4, handoff.Unknown)},
			desired: two, phase: handoff.PhaseUpgrade,
			want: []step{{handoff.ActionWait, "d2", "deployment"}},
		},
		"all desired Ready retires old sets workloads first": {
			sets: []handoff.Set{sup(mk("s1", "v1", "static", 1, handoff.Ready)), sup(mk("d1", "v1", "deployment", 2, handoff.Ready)),
				mk("s2", "v2", "static", 3, handoff.Ready), mk("d2", "v2", "deployment", 4, handoff.Ready)},
			desired: two, phase: handoff.PhaseHandoff,
			want: []step{{handoff.ActionRetire, "d1", "deployment"}, {handoff.ActionRetire, "s1", "static"}},
		},
		"a role the desired generation dropped is retired after the handoff": {
			sets: []handoff.Set{mk("d2", "v2", "deployment", 2, handoff.Ready), mk("s2", "v2", "static", 3, handoff.Ready),
				mk("t2", "v2", "statefulset", 4, handoff.Ready)},
			desired: sts, phase: handoff.PhaseHandoff,
			// Marked first, so its controller stops writing the Deployments
			// the statefulset set now lists.
			want: []step{{handoff.ActionSupersede, "d2", "deployment"}, {handoff.ActionRetire, "d2", "deployment"}},
		},
		"a terminating predecessor is waited for, not recreated": {
			sets: []handoff.Set{del(mk("s2", "v2", "static", 1, handoff.Ready))}, desired: &handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}}},
			phase: handoff.PhaseInstall, want: []step{{handoff.ActionWait, "s2", "static"}},
		},
		"a hash change is an update in place": {
			sets:    []handoff.Set{sup(mk("s1", "v1", "static", 1, handoff.Ready)), hash(mk("s2", "v2", "static", 2, handoff.Ready), "a")},
			desired: hashed, phase: handoff.PhaseUpgrade, want: []step{{handoff.ActionUpdate, "s2", "static"}},
		},
		"removal retires every set": {
			sets:  []handoff.Set{mk("s2", "v2", "static", 1, handoff.Ready), mk("d2", "v2", "deployment", 2, handoff.Ready), foreign},
			phase: handoff.PhaseRemove,
			want:  []step{{handoff.ActionRetire, "d2", "deployment"}, {handoff.ActionRetire, "s2", "static"}},
		},
		"steady state does nothing": {
			sets:    []handoff.Set{mk("s2", "v2", "static", 1, handoff.Ready), mk("d2", "v2", "deployment", 2, handoff.Ready), foreign},
			desired: two, phase: handoff.PhaseSteady,
		},
	}
	p := handoff.Planner{Family: family, RoleOrder: []string{"static", "deployment"}}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := p.Plan(tc.sets, tc.desired)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Phase != tc.phase {
				t.Errorf("phase %s, want %s", plan.Phase, tc.phase)
			}
			if diff := cmp.Diff(tc.want, steps(plan)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			rev := append([]handoff.Set(nil), tc.sets...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			again, _ := p.Plan(rev, tc.desired)
			if diff := cmp.Diff(plan, again); diff != "" {
				t.Errorf("plan depends on input order:\n%s", diff)
			}
		})
	}
}

func TestPlannerRejectsBadInput(t *testing.T) {
	p := handoff.Planner{Family: family}
	ok := &handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}}}
	noGen := mk("x", "", "static", 1, handoff.Ready)
	cases := map[string]struct {
		sets    []handoff.Set
		desired *handoff.Desired
		want    error
	}{
		"set without generation": {sets: []handoff.Set{noGen}, desired: ok, want: handoff.ErrInvalidSet},
		"set without role":       {sets: []handoff.Set{mk("x", "v1", "", 1, handoff.Ready)}, desired: ok, want: handoff.ErrInvalidSet},
		"same UID twice":         {sets: []handoff.Set{mk("x", "v1", "static", 1, handoff.Ready), mk("x", "v1", "static", 1, handoff.Ready)}, desired: ok, want: handoff.ErrInvalidSet},
		"empty generation ID":    {desired: &handoff.Desired{Roles: []handoff.Role{{Name: "a"}}}, want: handoff.ErrInvalidDesired},
		"duplicate roles":        {desired: &handoff.Desired{Generation: "v", Roles: []handoff.Role{{Name: "a"}, {Name: "a"}}}, want: handoff.ErrInvalidDesired},
		"unknown dependency":     {desired: &handoff.Desired{Generation: "v", Roles: []handoff.Role{{Name: "a", After: []string{"b"}}}}, want: handoff.ErrInvalidDesired},
		"cycle": {desired: &handoff.Desired{Generation: "v", Roles: []handoff.Role{{Name: "a", After: []string{"b"}}, {Name: "b", After: []string{"a"}}}},
			want: handoff.ErrInvalidDesired},
		"self dependency": {desired: &handoff.Desired{Generation: "v", Roles: []handoff.Role{{Name: "a", After: []string{"a"}}}}, want: handoff.ErrInvalidDesired},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := p.Plan(tc.sets, tc.desired)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(handoff.Plan{}, plan); diff != "" {
				t.Errorf("a plan came with the error:\n%s", diff)
			}
		})
	}
	var se *handoff.SetError
	if _, err := p.Plan([]handoff.Set{noGen}, ok); !errors.As(err, &se) || se.Name != "x" {
		t.Errorf("error %v does not name set x", err)
	}
}

// Over random families, no plan retires an old set while a desired set is
// not Ready (I5), none retires the single kept set of a desired role, and no
// action names a set outside the family (I4).
func TestPlannerPropertiesOverRandomFamilies(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	gens := []string{"v1", "v2", "v3"}
	roles := []string{"static", "deployment", "statefulset", "extra"}
	states := []handoff.State{handoff.Ready, handoff.NotReady, handoff.Unknown}
	p := handoff.Planner{Family: family, RoleOrder: roles}
	for iter := range 2000 {
		var sets []handoff.Set
		for i := range rng.IntN(9) {
			s := mk(fmt.Sprintf("s%d", i), gens[rng.IntN(3)], roles[rng.IntN(4)], rng.IntN(4), states[rng.IntN(3)])
			s.Deleting = rng.IntN(5) == 0
			s.Hash = []string{"", "h1", "h2"}[rng.IntN(3)]
			if rng.IntN(3) == 0 {
				s.SupersededBy = gens[rng.IntN(3)]
			}
			if rng.IntN(6) == 0 {
				s.Labels = map[string]string{"operator.tekton.dev/created-by": "Other", "operator.tekton.dev/type": "main"}
			}
			sets = append(sets, s)
		}
		var d *handoff.Desired
		if rng.IntN(6) > 0 {
			d = &handoff.Desired{Generation: gens[rng.IntN(3)]}
			for _, r := range roles[:1+rng.IntN(3)] {
				role := handoff.Role{Name: r, Hash: []string{"", "h1"}[rng.IntN(2)]}
				if r != "static" && rng.IntN(2) == 0 {
					role.After = []string{"static"}
				}
				d.Roles = append(d.Roles, role)
			}
		}
		plan, err := p.Plan(sets, d)
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		byName := map[string]handoff.Set{}
		for _, s := range sets {
			byName[s.Name] = s
		}
		for _, a := range plan.Actions {
			if a.Set == "" {
				continue
			}
			s, ok := byName[a.Set]
			if !ok || !family.Contains(s.Labels) || s.UID != a.UID {
				t.Fatalf("iteration %d: I4: %v names a set outside the family or with another UID", iter, a)
			}
		}
		if d == nil {
			continue
		}
		wanted := map[string]handoff.Role{}
		for _, r := range d.Roles {
			wanted[r.Name] = r
		}
		// The kept set of each desired role: the oldest live one.
		kept := map[string]handoff.Set{}
		for _, s := range sets {
			if _, ok := wanted[s.Role]; !ok || s.Generation != d.Generation || s.Deleting || !family.Contains(s.Labels) {
				continue
			}
			k, ok := kept[s.Role]
			if !ok || s.Created.Before(k.Created) || (s.Created.Equal(k.Created) && s.Name < k.Name) {
				kept[s.Role] = s
			}
		}
		allReady := true
		for _, r := range d.Roles {
			k, ok := kept[r.Name]
			allReady = allReady && ok && k.Readiness.State == handoff.Ready && (r.Hash == "" || r.Hash == k.Hash)
		}
		for _, a := range plan.Of(handoff.ActionRetire) {
			s := byName[a.Set]
			if _, ok := wanted[s.Role]; (!ok || s.Generation != d.Generation) && !allReady {
				t.Fatalf("iteration %d: I5: %v while the desired generation is not Ready\n%v", iter, a, plan)
			}
			if k, ok := kept[s.Role]; ok && k.Name == s.Name {
				t.Fatalf("iteration %d: retires the kept set %v", iter, a)
			}
		}
	}
}

// A Wait on a set that is not Ready carries what the set's probe said, so
// a status condition reads it instead of parsing the reason.
func TestWaitCarriesReadiness(t *testing.T) {
	failing := mk("s2", "v2", "static", 2, handoff.NotReady)
	failing.Readiness = handoff.Readiness{State: handoff.NotReady, Reason: "Error", Message: "webhook: apply refused"}
	plan, err := handoff.Planner{Family: family}.Plan([]handoff.Set{failing}, &handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}}})
	if err != nil {
		t.Fatal(err)
	}
	waits := plan.Of(handoff.ActionWait)
	if len(waits) != 1 {
		t.Fatalf("waits %v, want one", waits)
	}
	if d := cmp.Diff(failing.Readiness, waits[0].Readiness); d != "" {
		t.Errorf("the wait's readiness (-want +got):\n%s", d)
	}
	c := handoff.StepCondition("Ready", handoff.Result{Plan: plan, Requeue: true, Waiting: waits}, nil)
	if c.Reason != "Error" || c.Message != "set s2 (v2/static) is not ready: webhook: apply refused" {
		t.Errorf("condition %+v, want the set's reason and message", c)
	}
}
