package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// prune deletes what an update in place took out of a set that stays,
// now that the set is Ready for its new spec: each dropped resource that
// no live set of the family lists or still has to prune itself (one that
// does gets it, where the set owns it), as [Executor.Finalize] would when
// the set went (kept, protected and foreign objects stay; an object the set
// owns is released from it if it is kept), with a fresh read before each
// delete. Then it clears [DroppedAnnotation], on condition that the set is
// unchanged since it was read.
func (r *run) prune(ctx context.Context, uid types.UID) error {
	sp, ok := r.set(uid)
	if !ok || len(sp.Dropped) == 0 {
		return nil
	}
	s := *sp
	// Decided as a finalization of what the set dropped (and does not
	// list again): what another live set lists, or still has to prune
	// itself once it is Ready for the spec that dropped it, is kept and,
	// where the set owns it, handed to that set, which the garbage
	// collector would otherwise take it with; the rest is deleted.
	own := make(map[Ref]bool, len(s.Resources))
	for _, ref := range s.Resources {
		own[ref] = true
	}
	pending := Set{Name: s.Name, UID: s.UID, Generation: s.Generation, Role: s.Role, Created: s.Created}
	for _, ref := range s.Dropped {
		if !own[ref] {
			pending.Dropped = append(pending.Dropped, ref)
		}
	}
	items := finalization(pending, r.view, r.e.Prune).Items
	for i := range items {
		if items[i].Verdict == Delete {
			items[i].Reason = "dropped by an update in place of " + s.Name + ", listed by no other set"
		}
	}
	if err := r.prefetch(ctx, refsOf(items), false); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("prune: read what it dropped: %w", err)}
	}
	// The RBAC objects it dropped, and the record cleared after them,
	// wait until every other delete of the Step is done (see deletedLast).
	return r.inOrder(ctx, items,
		func(ctx context.Context, items []Item) error { return r.pruneItems(ctx, s, items) },
		func(ctx context.Context) error { return r.pruned(ctx, s) })
}

// pruneItems settles what the set s, which stays, dropped.
func (r *run) pruneItems(ctx context.Context, s Set, items []Item) error {
	r.staying = s.UID
	defer func() { r.staying = "" }()
	others := r.others(s.UID)
	var errs []error
	for _, it := range items {
		if r.outOfTime() {
			return errOutOfTime
		}
		if _, _, err := r.settle(ctx, s, others, it, true); err != nil {
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("prune what an update dropped: %w", err)}
	}
	return nil
}

// pruned clears [DroppedAnnotation] of the set s once what it dropped is
// settled, on condition that the set is unchanged since it was read.
func (r *run) pruned(ctx context.Context, s Set) error {
	r.record(Call{Verb: "patch", Resource: r.family.Resource.Resource, Name: s.Name})
	if r.e.DryRun {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": s.UID, "resourceVersion": s.Object.GetResourceVersion(),
		"annotations": map[string]any{DroppedAnnotation: nil},
	}})
	if err != nil {
		return err
	}
	live, err := r.e.sets().Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		// A Conflict: the set changed (another update dropped more); the
		// next Step prunes again from what it then records.
		return &SetError{Name: s.Name, Err: fmt.Errorf("prune: clear %s: %w", DroppedAnnotation, err)}
	}
	r.saw(live)
	return nil
}
