package inventory

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Stamp marks every object the operator is about to apply for generation
// with the writer stamp ([handoff.Guard.Stamp]) of the inventory set of
// that generation that lists it, for [handoff.RolloutProbe] with Stamped:
// a workload then counts as rolled out for the new inventory only once
// this apply has reached it. family is the family as observed: the
// [handoff.Result.Family] of the Step that recorded the inventory (or
// Family().ObserveAll over a List through Sets); generation is the name
// given to [Inventory.Generation].
//
// Only the generation's current parts count: live, and not superseded. A
// part that an update in place dropped (the generation shrank from 12
// parts to 5) stays live, superseded by its own generation, until the new
// parts are rolled out, and may still list an object that a current part
// lists now: the stamp is that current part's, the one whose probe waits
// for it. Should two current parts list one object (a Step that updated
// one part and not yet the other), the lowest part number wins.
//
// It fails, marking nothing, when an object is listed by no current part
// of the generation: the inventory is recorded before anything is applied
// (the Step that creates it comes first), and an object applied without it
// could not be deleted later by a handoff that does not know of it.
func Stamp(family []handoff.Set, generation string, objs []unstructured.Unstructured) error {
	byRef := listers(family, LabelValue(generation))
	guards := map[int]handoff.Guard{}
	at := make([]int, len(objs))
	for i := range objs {
		ref := handoff.RefOf(&objs[i])
		j, ok := byRef[ref]
		if !ok {
			return fmt.Errorf("%w: %s is listed by no current inventory part of generation %s: record the inventory (Step) before applying",
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

// listers indexes the resources the current sets of generation list (live,
// readable, not superseded), each by the set of the lowest part number
// that lists it.
func listers(family []handoff.Set, generation string) map[handoff.Ref]int {
	var current []int
	for i, s := range family {
		if s.Generation == generation && !s.Deleting && s.Invalid == nil && s.SupersededBy == "" {
			current = append(current, i)
		}
	}
	sort.SliceStable(current, func(a, b int) bool {
		sa, sb := family[current[a]], family[current[b]]
		na, oka := partNumber(sa.Role)
		nb, okb := partNumber(sb.Role)
		switch {
		case oka && okb && na != nb:
			return na < nb
		case oka != okb:
			return oka
		}
		return sa.Name < sb.Name
	})
	byRef := map[handoff.Ref]int{}
	for _, i := range current {
		for _, ref := range family[i].Resources {
			if _, ok := byRef[ref]; !ok {
				byRef[ref] = i
			}
		}
	}
	return byRef
}

// partNumber returns N of a role part-N, and whether the role is one.
func partNumber(role string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(role, RolePrefix))
	return n, err == nil && strings.HasPrefix(role, RolePrefix) && n >= 0
}

// Stamper is [Stamp] one object at a time, in the shape of a manifestival
// Transformer (func(*unstructured.Unstructured) error): an operator
// appends it to the transformers of the manifest it applies. An object no
// current part of generation lists fails the transform.
func Stamper(family []handoff.Set, generation string) func(*unstructured.Unstructured) error {
	byRef := listers(family, LabelValue(generation))
	guards := map[int]handoff.Guard{}
	return func(u *unstructured.Unstructured) error {
		ref := handoff.RefOf(u)
		j, ok := byRef[ref]
		if !ok {
			return fmt.Errorf("%w: %s is listed by no current inventory part of generation %s: record the inventory (Step) before applying",
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
