package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// A record of what an update in place dropped (Family.DroppedSets) is a
// set of a role the generation does not have: it does not make an update
// in place an upgrade, and it retires, with a reason that says what it
// is, once the generation is Ready.
func TestPlanRetiresRecordsOfDropped(t *testing.T) {
	fam := handoff.Family{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Selector: map[string]string{"c": "x"}, GenerationLabel: "g"}
	set := func(name, role string, ready bool, superseded string) handoff.Set {
		s := handoff.Set{Name: name, UID: types.UID("uid-" + name), Generation: "v1", Role: role, SupersededBy: superseded,
			Labels: map[string]string{"c": "x"}, Hash: "h2", Readiness: handoff.Readiness{State: handoff.NotReady}}
		if ready {
			s.Readiness.State = handoff.Ready
		}
		return s
	}
	record := set("x-dropped-0123456789-3bfc269594", handoff.DroppedRolePrefix+"0123456789", false, "v1")
	desired := &handoff.Desired{Generation: "v1", Roles: []handoff.Role{{Name: "part-0", Hash: "h2"}}}
	p := handoff.Planner{Family: fam}

	plan, err := p.Plan([]handoff.Set{set("x-part-0", "part-0", false, ""), record}, desired)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Phase != handoff.PhaseInstall || len(plan.Of(handoff.ActionRetire)) != 0 || len(plan.Of(handoff.ActionSupersede)) != 0 {
		t.Errorf("while the part is not Ready: want phase Install, no retire, no supersede:\n%s", plan)
	}
	plan, err = p.Plan([]handoff.Set{set("x-part-0", "part-0", true, ""), record}, desired)
	if err != nil {
		t.Fatal(err)
	}
	retires := plan.Of(handoff.ActionRetire)
	if plan.Phase != handoff.PhaseHandoff || len(retires) != 1 || retires[0].Set != record.Name || !strings.Contains(retires[0].Reason, "update in place") {
		t.Errorf("once the part is Ready: want the record retired as such:\n%s", plan)
	}
}

// An update in place that drops more than DroppedAnnotation holds (1 100
// ConfigMaps with long names move to another namespace: some 290 KB as
// JSON, over the 256 KiB the API server takes for all of an object's
// annotations) is
// made all the same, with a record the API server takes: the resources it
// holds are pruned, those it leaves out linger, and the Step that updated
// says so with ErrDroppedUnrecorded naming the set and them.
func TestUpdateInPlaceBoundsTheDroppedRecord(t *testing.T) {
	ctx := context.Background()
	// (Nothing here is collected; a pass after each write would cost
	// seconds.)
	f := newFixture(t, handofftest.WithoutAutoGC())
	f.fam.HashAnnotation = "operator.tekton.dev/last-applied-hash"
	f.fam.Probe = alwaysReady{}
	f.exec.Family = f.fam
	at := func(ns string) []*unstructured.Unstructured {
		var objs []*unstructured.Unstructured
		for i := 0; i < 1100; i++ {
			name := fmt.Sprintf("config-observability-defaults-%04d-", i) + strings.Repeat("x", 170)
			objs = append(objs, mkObj("v1", "ConfigMap", ns, name, "v1"))
		}
		return objs
	}
	set := f.fam.SetName("v1", "static")
	old, moved := at("old-ns"), at("new-ns")
	owners := map[string]string{}
	for _, o := range old {
		owners[o.GetName()] = set
	}
	f.seed(t, []setSpec{{name: set, gen: "v1", role: "static", ready: true, lists: old}}, append(old, moved...), owners)
	seeded, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: set})
	seeded.SetAnnotations(map[string]string{f.fam.HashAnnotation: "before"})
	if _, err := f.c.ClientFor("seed").Resource(handofftest.SetResource).Update(ctx, seeded, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.exec.Build = func(context.Context, handoff.Desired, handoff.Role) (*unstructured.Unstructured, error) {
		return f.setObject(setSpec{gen: "v1", role: "static", lists: moved}), nil
	}
	desired := &handoff.Desired{Generation: "v1", Roles: []handoff.Role{{Name: "static", Hash: "after"}}}

	var unrecorded []error
	settled := false
	for i := 0; i < 5 && !settled; i++ {
		res, err := f.exec.Step(ctx, desired)
		if err != nil {
			if !errors.Is(err, handoff.ErrDroppedUnrecorded) {
				t.Fatalf("Step %d: %v", i, err)
			}
			unrecorded = append(unrecorded, err)
			continue
		}
		settled = !res.Requeue
	}
	if !settled {
		t.Fatal("the move did not settle")
	}
	if len(unrecorded) != 1 {
		t.Fatalf("%d Steps failed with ErrDroppedUnrecorded, want 1 (the update's)", len(unrecorded))
	}
	var se *handoff.SetError
	if !errors.As(unrecorded[0], &se) || se.Name != set || !strings.Contains(se.Error(), "config-observability-defaults-") {
		t.Errorf("error %.300v does not name set %s and what it left out", unrecorded[0], set)
	}
	var ue *handoff.UnrecordedError
	if !errors.As(unrecorded[0], &ue) || ue.Dropped != len(old) {
		t.Fatalf("error %.300v is no UnrecordedError of the %d dropped", unrecorded[0], len(old))
	}
	reported := map[handoff.Ref]bool{}
	for _, ref := range ue.Left {
		reported[ref] = true
	}
	pruned, left := 0, 0
	for i := range old {
		if !f.c.Exists(handofftest.KeyOf(moved[i])) {
			t.Fatalf("%s is gone", handofftest.KeyOf(moved[i]))
		}
		if f.c.Exists(handofftest.KeyOf(old[i])) != reported[handoff.RefOf(old[i])] {
			t.Errorf("%s: exists %v, reported left out %v", handofftest.KeyOf(old[i]), f.c.Exists(handofftest.KeyOf(old[i])), reported[handoff.RefOf(old[i])])
		}
		if f.c.Exists(handofftest.KeyOf(old[i])) {
			left++
		} else {
			pruned++
		}
	}
	if pruned < 400 || left == 0 || !strings.Contains(unrecorded[0].Error(), fmt.Sprintf("%d of the 1100", left)) {
		t.Errorf("%d pruned, %d left in old-ns; error: %.300v", pruned, left, unrecorded[0])
	}
	live, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: set})
	if v := live.GetAnnotations()[handoff.DroppedAnnotation]; v != "" {
		t.Errorf("the set still records %d bytes of dropped resources", len(v))
	}
}

// alwaysReady says every set is Ready.
type alwaysReady struct{}

func (alwaysReady) Ready(*unstructured.Unstructured) handoff.Readiness {
	return handoff.Readiness{State: handoff.Ready}
}

// What two sets of a generation both dropped (an object that moved out of
// both) is pruned by the second to be Ready, not by the first: each
// still needs it until it is Ready for the spec that dropped it.
func TestPruneWaitsForEverySetThatDropped(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	moved := mkObj("v1", "ConfigMap", testNS, "moved", "v1")
	record := fmt.Sprintf(`[{"Group":"","Kind":"ConfigMap","Namespace":%q,"Name":"moved"}]`, testNS)
	f.seed(t, []setSpec{
		{name: "static", gen: "v1", role: "static", ready: true},
		{name: "deployment", gen: "v1", role: "deployment"},
	}, []*unstructured.Unstructured{moved}, map[string]string{"moved": "static"})
	for _, name := range []string{"static", "deployment"} {
		s, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: name})
		ann := s.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[handoff.DroppedAnnotation] = record
		s.SetAnnotations(ann)
		if _, err := f.c.ClientFor("seed").Resource(handofftest.SetResource).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	desired := &handoff.Desired{Generation: "v1", Roles: []handoff.Role{{Name: "static"}, {Name: "deployment", After: []string{"static"}}}}
	res, err := f.exec.Step(ctx, desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Of(handoff.ActionPrune)) != 1 {
		t.Fatalf("want one prune, of the Ready set:\n%s", res.Plan)
	}
	if !f.c.Exists(handofftest.KeyOf(moved)) {
		t.Fatal("the ConfigMap was pruned while the set deployment, which dropped it too, is not Ready")
	}
	// deployment is Ready for its spec: its prune deletes it.
	s, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: "deployment"})
	s.Object["status"] = map[string]any{"observedGeneration": s.GetGeneration(), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	if _, err := f.c.ClientFor("controller").Resource(handofftest.SetResource).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.exec.Step(ctx, desired); err != nil {
		t.Fatal(err)
	}
	if f.c.Exists(handofftest.KeyOf(moved)) {
		t.Error("the ConfigMap both sets dropped is still there once both are Ready")
	}
}
