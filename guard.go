package handoff

import "fmt"

// Guard answers, for one set, whether its controller may write a resource
// the set lists, while generations coexist. Without it the old generation's
// controller would write shared resources back to the old release while the
// new one writes them forward, until the old set is gone.
//
// The contract for set controllers: before applying a resource, ask
// [Guard.MayApply]; when it says no, leave the resource alone (it is not
// deleted, only not written). The executor marks old sets with
// [Family.SupersededAnnotation] as the first step of an upgrade and removes
// the mark on a rollback, which gives the resources back.
type Guard struct {
	set    Set
	claims map[Ref]string
}

// NewGuard builds the guard of set from the sets of its family. It costs one
// pass over the resources of the superseding generation, so a controller
// builds it once per reconcile, not once per resource.
func NewGuard(set Set, family []Set) Guard {
	g := Guard{set: set}
	if set.SupersededBy == "" || set.Deleting {
		return g
	}
	g.claims = make(map[Ref]string)
	for _, s := range family {
		if s.UID == set.UID || s.Deleting || s.Generation != set.SupersededBy {
			continue
		}
		for _, r := range s.Resources {
			if _, ok := g.claims[r]; !ok {
				g.claims[r] = s.Name
			}
		}
	}
	return g
}

// MayApply reports whether the set may write r; when it may not, reason
// names what stops it.
//
// A set being deleted writes nothing. A set that is not superseded writes
// everything it lists. A superseded set writes only what no live set of the
// superseding generation lists: the rest has a newer owner.
func (g Guard) MayApply(r Ref) (ok bool, reason string) {
	if g.set.Deleting {
		return false, fmt.Sprintf("set %s is being deleted", g.set.Name)
	}
	if by, claimed := g.claims[r]; claimed {
		return false, fmt.Sprintf("%s is claimed by %s of generation %s", r, by, g.set.SupersededBy)
	}
	return true, ""
}

// MayApply is [NewGuard] followed by [Guard.MayApply], for a single question.
func MayApply(set Set, r Ref, family []Set) bool {
	ok, _ := NewGuard(set, family).MayApply(r)
	return ok
}
