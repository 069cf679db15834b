package handoff_test

import (
	"strings"
	"testing"

	"github.com/kube-handoff/handoff"
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
