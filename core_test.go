package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

func TestCorePlannerCases(t *testing.T) {
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

func TestCorePlannerRejectsBadInput(t *testing.T) {
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

func smallComponent(gen string) map[string][]*unstructured.Unstructured {
	cm := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"v": gen}}}
		u.SetNamespace("ns")
		u.SetName(name)
		return u
	}
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"image": gen}}}
	dep.SetNamespace("ns")
	dep.SetName("controller")
	return map[string][]*unstructured.Unstructured{
		"static":     {cm("shared-a"), cm("shared-b"), cm("only-" + gen)},
		"deployment": {dep},
	}
}

var (
	sharedKeys = []handofftest.Key{{Kind: "ConfigMap", Namespace: "ns", Name: "shared-a"}, {Kind: "ConfigMap", Namespace: "ns", Name: "shared-b"},
		{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "controller"}}
	onlyV1 = handofftest.Key{Kind: "ConfigMap", Namespace: "ns", Name: "only-v1"}
	onlyV2 = handofftest.Key{Kind: "ConfigMap", Namespace: "ns", Name: "only-v2"}
)

// installed returns a World with the small component installed at v1, and
// the desired v1 and v2.
func installed(t *testing.T) (*handofftest.World, *handoff.Desired, *handoff.Desired) {
	t.Helper()
	w := handofftest.NewWorld("TektonPipeline")
	roles := []string{"static", "deployment"}
	v1 := w.Desire("v1", roles, smallComponent("v1"))
	v2 := w.Desire("v2", roles, smallComponent("v2"))
	if _, err := w.Converge(context.Background(), v1, 30); err != nil {
		t.Fatal(err)
	}
	return w, v1, v2
}

// upgrade installs v1, then upgrades to v2 with faults injected by inject,
// and checks I1, I2, I3 and (inside Converge) I5.
func upgrade(t *testing.T, inject func(*handofftest.World)) {
	t.Helper()
	ctx := context.Background()
	w, _, v2 := installed(t)
	start := w.Cluster.Now()
	if inject != nil {
		inject(w)
	}
	if _, err := w.Converge(ctx, v2, 100); err != nil {
		t.Fatal(err)
	}
	w.Cluster.DisableFaults()
	if _, err := w.Converge(ctx, v2, 30); err != nil {
		t.Fatal(err)
	}
	if gaps := w.Cluster.Gaps(sharedKeys, start, w.Cluster.Now()); len(gaps) != 0 {
		t.Errorf("I1: %v", gaps)
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, v2); err != nil {
		t.Error(err)
	}
	if w.Cluster.Exists(onlyV1) || !w.Cluster.Exists(onlyV2) {
		t.Errorf("I3: only-v1 exists %v (want false), only-v2 exists %v (want true)", w.Cluster.Exists(onlyV1), w.Cluster.Exists(onlyV2))
	}
}

func TestCoreUpgradeKeepsSharedResources(t *testing.T) { upgrade(t, nil) }

func TestCoreUpgradeSurvivesACrashAtEveryExecutorCall(t *testing.T) {
	// E: the executor's calls during a clean upgrade.
	ctx := context.Background()
	w, _, v2 := installed(t)
	before := 0
	for k, n := range w.Cluster.Calls() {
		if k.Actor == "executor" {
			before += n
		}
	}
	if _, err := w.Converge(ctx, v2, 30); err != nil {
		t.Fatal(err)
	}
	e := -before
	for k, n := range w.Cluster.Calls() {
		if k.Actor == "executor" {
			e += n
		}
	}
	t.Logf("a clean upgrade takes E=%d executor calls; crashing at each, before and after commit", e)
	for i := 1; i <= e; i++ {
		for _, mode := range []handofftest.Mode{handofftest.BeforeCommit, handofftest.AfterCommit} {
			upgrade(t, func(w *handofftest.World) {
				w.Cluster.InjectFaults(handofftest.FailNth(i, mode, nil), "executor")
			})
		}
	}
}

func TestCoreUpgradeUnderRandomFaults(t *testing.T) {
	for seed := int64(0); seed < 500; seed++ {
		upgrade(t, func(w *handofftest.World) {
			w.Cluster.InjectFaults(handofftest.RandomFaults(seed, 0.2), "executor", "controller")
		})
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

func TestCoreLegacyFlowOpensAGapAndOursDoesNot(t *testing.T) {
	ctx := context.Background()
	gaps := map[bool]int{}
	for _, legacy := range []bool{false, true} {
		w, _, v2 := installed(t)
		start := w.Cluster.Now()
		var err error
		if legacy {
			_, err = w.ConvergeLegacy(ctx, v2, 30)
		} else {
			_, err = w.Converge(ctx, v2, 30)
		}
		if err != nil {
			t.Fatal(err)
		}
		g := w.Cluster.Gaps(sharedKeys, start, w.Cluster.Now())
		gaps[legacy] = len(g)
		t.Logf("legacy=%v: %d absences %v", legacy, len(g), g)
	}
	if gaps[false] != 0 {
		t.Errorf("handoff opened %d gaps, want 0", gaps[false])
	}
	if gaps[true] != len(sharedKeys) {
		t.Errorf("the legacy flow opened %d gaps, want one per shared resource (%d)", gaps[true], len(sharedKeys))
	}
}

func TestCoreSteadyStateIsOneList(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	v1 := w.Desire("v1", []string{"static", "deployment"}, smallComponent("v1"))
	if _, err := w.Converge(ctx, v1, 30); err != nil {
		t.Fatal(err)
	}
	w.Cluster.ClearActions()
	before := w.Cluster.Calls()
	if _, err := w.Executor.Step(ctx, v1); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for k, n := range w.Cluster.Calls() {
		if d := n - before[k]; k.Actor == "executor" && d > 0 {
			got[k.Verb] += d
		}
	}
	if diff := cmp.Diff(map[string]int{"list": 1}, got); diff != "" {
		t.Errorf("steady-state calls (-want +got):\n%s", diff)
	}
}

// Over random families, no plan retires an old set while a desired set is
// not Ready (I5), none retires the single kept set of a desired role, and no
// action names a set outside the family (I4).
func TestCorePlannerPropertiesOverRandomFamilies(t *testing.T) {
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
