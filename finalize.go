package handoff

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// FinalizeResult is what [Executor.Finalize] did, resource by resource.
type FinalizeResult struct {
	// Decision is the pure decision the work followed.
	Decision Decision
	// Deleted holds the resources deleted: those nothing else removes
	// (installed without an owner, see [PruneOptions.Unowned]).
	Deleted []Item
	// Collected holds the obsolete resources the set alone owns: the
	// garbage collector deletes them once the set is gone, so Finalize
	// writes nothing for them.
	Collected []Item
	// HandedOver holds the kept resources whose ownerReferences moved from
	// the set to the live sets that list them: only those whose owners
	// changed.
	HandedOver []Item
	// Kept holds the resources a live set lists that needed no write: the
	// set did not own them, or they are gone.
	Kept []Item
	// Skipped holds the resources left alone, each with its reason: a
	// Delete item the live check refused, a protected or keep-annotated one
	// (Detached when it was released from the set), one another family
	// serves.
	Skipped []Item
	// Unserved holds the resources skipped because their kind is not
	// served, established by a fresh discovery (see [ErrNotServed]), so no
	// object of them can exist. A resource a live set lists is never
	// skipped so: that is an error.
	Unserved []Item
	// Writes are the writes made (or, in a dry run, that would be made).
	Writes []Call
	// Reads says how Finalize read the resources: one List per scope
	// (group-kind and namespace), Gets where it could not list, and a Get
	// to confirm each object before it deletes it.
	Reads Reads
}

// Finalize is what a set controller calls from its finalizer (tektoncd/
// operator: FinalizeKind) instead of deleting every listed resource by
// name. It lists the family, keeps and hands over every resource a live
// successor lists, releases protected and keep-annotated resources from the
// set (their ownerReference to it is removed, so the garbage collector
// does not take them), and deletes only what no other set lists and the
// set alone owns, each delete with a UID precondition, RBAC objects (Roles,
// ClusterRoles, their bindings) after everything else. It is idempotent:
// run again after a failure at any point, it finishes the job and never
// deletes a kept resource. On error the caller keeps its finalizer and
// retries.
//
// set may come from a typed client converted to unstructured: a set with
// no apiVersion and kind is taken to be of the family's kind. A set that
// cannot be read whole fails with [ErrInvalidSet]; another set of the
// family that cannot be read whole does not stop it, and counts as a
// lister of what it could be read to list.
func (e *Executor) Finalize(ctx context.Context, set *unstructured.Unstructured) (FinalizeResult, error) {
	r, err := e.start(false)
	if err != nil {
		return FinalizeResult{}, err
	}
	set = set.DeepCopy()
	r.family.typeMeta(set)
	if gk := set.GroupVersionKind().GroupKind(); e.Family.Kind != "" && (gk.Kind != e.Family.Kind || gk.Group != e.Family.Resource.Group) {
		return FinalizeResult{}, &SetError{Name: set.GetName(), Err: fmt.Errorf("%w: kind %s is not the family's set kind %s", ErrInvalidSet, gk, e.Family.Kind)}
	}
	retiring, err := r.family.Observe(set)
	if err != nil {
		return FinalizeResult{}, err
	}
	if err := r.observe(ctx); err != nil {
		return FinalizeResult{}, err
	}
	// Decide from the set as given (its manifests as the caller read it),
	// against the family as listed.
	if cur, ok := r.set(retiring.UID); ok {
		*cur = retiring
	} else {
		r.view = append(r.view, retiring)
	}
	r.retiring = []types.UID{retiring.UID}
	others := r.others(retiring.UID)
	res := FinalizeResult{Decision: r.decide(retiring.UID)}
	var errs []error
	settle := func(it Item, others []Set) {
		done, what, err := r.settle(ctx, retiring, others, it, true)
		if err != nil {
			if it.Verdict == Keep {
				err = fmt.Errorf("hand over to %s: %w", it.Successor, err)
			}
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
			return
		}
		switch what {
		case handedOver:
			res.HandedOver = append(res.HandedOver, done)
		case kept:
			res.Kept = append(res.Kept, done)
		case deleted:
			res.Deleted = append(res.Deleted, done)
		case collected:
			res.Collected = append(res.Collected, done)
		case unserved:
			res.Unserved = append(res.Unserved, done)
		default:
			res.Skipped = append(res.Skipped, done)
		}
	}
	if err := r.prefetch(ctx, refsOf(res.Decision.Items), false); err != nil {
		return res, err
	}
	obsolete := map[Ref]bool{}
	for _, it := range res.Decision.Items {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if it.Verdict == Delete {
			obsolete[it.Ref] = true
			continue
		}
		settle(it, others)
	}
	if len(obsolete) > 0 && ctx.Err() == nil {
		// Confirm before deleting: list the family again and decide the
		// obsolete resources anew, so that a set created while this
		// finalizer ran (the component installed again) keeps what it
		// lists. The same List reads the sets of other families, which
		// keep what they list or last wrote.
		if err := r.observeWide(ctx); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		if cur, ok := r.set(retiring.UID); ok {
			*cur = retiring
		} else {
			r.view = append(r.view, retiring)
		}
		others = r.others(retiring.UID)
		var confirmed []Item
		for _, it := range r.decide(retiring.UID).Items {
			if obsolete[it.Ref] {
				confirmed = append(confirmed, it)
			}
		}
		// RBAC objects last, and only once everything else is done (see
		// deletedLast): on an error the caller retries with its rights
		// whole.
		first, last := splitLast(confirmed)
		for _, it := range first {
			settle(it, others)
		}
		if len(errs) == 0 {
			for _, it := range last {
				settle(it, others)
			}
		}
	}
	res.Writes, res.Reads = r.writes, r.live.reads
	err = errors.Join(errs...)
	r.reportFinalize(set.GetName(), res, err)
	return res, err
}
