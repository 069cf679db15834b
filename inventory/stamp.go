package inventory

import (
	"fmt"

	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Stamp marks every object the operator is about to apply for generation
// with the writer stamp ([handoff.Guard.Stamp]) of the inventory set of
// that generation that lists it, for [handoff.RolloutProbe] with Stamped:
// a workload then counts as rolled out for the new inventory only once
// this apply has reached it. family is the family as observed (for
// instance with Family().ObserveAll over a List through Sets).
//
// It fails, marking nothing, when an object is listed by no live set of
// the generation: the inventory is recorded before anything is applied
// (the Step that creates it comes first), and an object applied without it
// could not be deleted later by a handoff that does not know of it.
func Stamp(family []handoff.Set, generation string, objs []unstructured.Unstructured) error {
	byRef := map[handoff.Ref]int{}
	for i, s := range family {
		if s.Generation != generation || s.Deleting || s.Invalid != nil {
			continue
		}
		for _, ref := range s.Resources {
			if _, ok := byRef[ref]; !ok {
				byRef[ref] = i
			}
		}
	}
	guards := map[int]handoff.Guard{}
	at := make([]int, len(objs))
	for i := range objs {
		ref := handoff.RefOf(&objs[i])
		j, ok := byRef[ref]
		if !ok {
			return fmt.Errorf("%w: %s is listed by no inventory of generation %s: record the inventory (Step) before applying",
				ErrInvalidInventory, ref, generation)
		}
		at[i] = j
		if _, ok := guards[j]; !ok {
			guards[j] = handoff.NewGuard(family[j], family)
		}
	}
	for i := range objs {
		guards[at[i]].Stamp(&objs[i])
	}
	return nil
}
