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
	byRef := listers(family, generation)
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

// listers indexes the resources the live sets of generation list, each by
// the first such set.
func listers(family []handoff.Set, generation string) map[handoff.Ref]int {
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
	return byRef
}

// Stamper is [Stamp] one object at a time, in the shape of a manifestival
// Transformer (func(*unstructured.Unstructured) error): an operator
// appends it to the transformers of the manifest it applies. An object no
// live set of generation lists fails the transform.
func Stamper(family []handoff.Set, generation string) func(*unstructured.Unstructured) error {
	byRef := listers(family, generation)
	guards := map[int]handoff.Guard{}
	return func(u *unstructured.Unstructured) error {
		ref := handoff.RefOf(u)
		j, ok := byRef[ref]
		if !ok {
			return fmt.Errorf("%w: %s is listed by no inventory of generation %s: record the inventory (Step) before applying",
				ErrInvalidInventory, ref, generation)
		}
		g, ok := guards[j]
		if !ok {
			g = handoff.NewGuard(family[j], family)
			guards[j] = g
		}
		g.Stamp(u)
		return nil
	}
}
