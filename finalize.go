package handoff

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FinalizeResult is what [Executor.Finalize] did, resource by resource.
type FinalizeResult struct {
	// Decision is the pure decision the work followed.
	Decision Decision
	// Deleted, HandedOver and Skipped hold the items by what happened;
	// a Delete item the live check refused is in Skipped with its reason.
	Deleted    []Item
	HandedOver []Item
	Skipped    []Item
	// Writes are the writes made (or, in a dry run, that would be made).
	Writes []Call
}

// Finalize is what a set controller calls from its finalizer (tektoncd/
// operator: FinalizeKind) instead of deleting every listed resource by
// name. It lists the family, keeps and hands over every resource a live
// successor lists, and deletes only what no other set lists and the set
// alone owns, each delete with a UID precondition. It is idempotent: run
// again after a failure at any point, it finishes the job and never deletes
// a kept resource. On error the caller keeps its finalizer and retries.
func (e *Executor) Finalize(ctx context.Context, set *unstructured.Unstructured) (FinalizeResult, error) {
	if gk := set.GroupVersionKind().GroupKind(); e.Family.Kind != "" && (gk.Kind != e.Family.Kind || gk.Group != e.Family.Resource.Group) {
		return FinalizeResult{}, &SetError{Name: set.GetName(), Err: fmt.Errorf("%w: kind %s is not the family's set kind %s", ErrInvalidSet, gk, e.Family.Kind)}
	}
	retiring, err := e.Family.Observe(set)
	if err != nil {
		return FinalizeResult{}, err
	}
	family, err := e.observe(ctx)
	if err != nil {
		return FinalizeResult{}, err
	}
	others := make([]Set, 0, len(family))
	for _, s := range family {
		if s.UID != retiring.UID {
			others = append(others, s)
		}
	}
	res := FinalizeResult{Decision: Finalization(retiring, others, e.Prune)}
	var errs []error
	var step Result
	for _, it := range res.Decision.Items {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		switch it.Verdict {
		case Keep:
			if err := e.handoverOne(ctx, &step, retiring, it); err != nil {
				errs = append(errs, &ResourceError{Ref: it.Ref, Err: fmt.Errorf("hand over to %s: %w", it.Successor, err)})
				continue
			}
			res.HandedOver = append(res.HandedOver, it)
		case Delete:
			done, err := e.deleteOne(ctx, &step, retiring, others, it)
			if err != nil {
				errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
				continue
			}
			if done.Verdict == Delete {
				res.Deleted = append(res.Deleted, done)
			} else {
				res.Skipped = append(res.Skipped, done)
			}
		default:
			res.Skipped = append(res.Skipped, it)
		}
	}
	res.Writes = step.Writes
	return res, errors.Join(errs...)
}

// deleteOne checks the live object and deletes it when [LiveVerdict] says
// so; it returns the item with the verdict that was carried out.
func (e *Executor) deleteOne(ctx context.Context, res *Result, retiring Set, others []Set, it Item) (Item, error) {
	client, resource, err := e.resource(it.Ref)
	if meta.IsNoMatchError(err) {
		it.Verdict, it.Reason = Skip, "kind is not served"
		return it, nil
	}
	if err != nil {
		return it, err
	}
	live, err := client.Get(ctx, it.Ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return it, err
	}
	it.Verdict, it.Reason = LiveVerdict(it, live, retiring, others, e.Prune)
	if it.Verdict != Delete {
		return it, nil
	}
	e.record(res, Call{Verb: "delete", Resource: resource, Namespace: it.Ref.Namespace, Name: it.Ref.Name})
	if e.DryRun {
		return it, nil
	}
	uid := live.GetUID()
	policy := e.ResourcePropagation
	if policy == "" {
		policy = metav1.DeletePropagationBackground
	}
	err = client.Delete(ctx, it.Ref.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &policy,
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or replaced by another object this check did not see.
		it.Verdict, it.Reason = Skip, "gone or replaced before the delete"
		return it, nil
	}
	return it, err
}
