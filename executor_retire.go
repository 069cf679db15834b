package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// This file holds retirement: the handover before a set's delete, and finish
// for a set without a finalizer of its own.

// retire makes every resource the set lists safe for it to go (shared
// ones handed to their successors, kept ones released; for a set without a
// finalizer, the obsolete resources installed without an owner deleted)
// and then deletes exactly that set, by name and UID.
func (r *run) retire(ctx context.Context, uid types.UID) error {
	w, err := r.retireWrite(ctx, uid)
	if err != nil || w == nil {
		return err
	}
	return w.run(ctx)
}

// needsFinalizer reports whether a set has no finalizer, so no controller
// to finalize it (deleted before its controller first saw it, or it has
// none): the garbage collector takes what it owns, but what it installed
// without an owner would stay for good.
func needsFinalizer(s Set) bool { return s.Object != nil && len(s.Object.GetFinalizers()) == 0 }

// retireWrite does what a retirement does before its delete and returns
// the delete, as a write; nil for a set not in the view, and in a dry run,
// which records the delete and, for a set the Step finalizes itself, what
// that finalization writes.
func (r *run) retireWrite(ctx context.Context, uid types.UID) (*setWrite, error) {
	sp, ok := r.set(uid)
	if !ok {
		return nil, nil
	}
	s := *sp
	d := r.decide(uid)
	others := r.others(uid)
	// A set with no finalizer: the executor finalizes it itself. Its own
	// finalizer keeps the set until that is done, so a delete that fails
	// is tried again by the next Step (ActionFinalize), and nothing is
	// deleted while a live set lists it.
	own := needsFinalizer(s)
	var errs []error
	if err := r.prefetch(ctx, refsOf(d.Items), false); err != nil {
		return nil, &SetError{Name: s.Name, Err: fmt.Errorf("retire: read what it lists: %w", err)}
	}
	for _, it := range d.Items {
		if r.outOfTime() {
			return nil, errOutOfTime
		}
		done, what, err := r.settle(ctx, s, others, it, false)
		if err != nil {
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
			continue
		}
		if what == handedOver || done.Detached {
			r.keptCount++
		}
		// What a live set lists, and a protected or keep-annotated
		// resource released, is final; the rest of what no live set lists
		// is decided when the set is finalized (by finish for a set
		// without a finalizer: it reports it, released or not).
		switch {
		case it.Verdict != Delete, done.Detached && !own:
			r.note(uid, done, what)
		case done.Detached:
			if r.detached == nil {
				r.detached = map[retiredRef]bool{}
			}
			r.detached[retiredRef{uid, it.Ref}] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &SetError{Name: s.Name, Err: fmt.Errorf("retire: hand over or release resources: %w", err)}
	}
	if own {
		if err := r.addFinalizer(ctx, s); err != nil {
			return nil, err
		}
	}
	policy := r.e.Propagation
	if policy == "" {
		policy = metav1.DeletePropagationBackground
	}
	r.record(Call{Verb: "delete", Resource: r.family.Resource.Resource, Name: s.Name})
	sp.Deleting = true // no later retire of this Step hands anything to it
	if r.e.DryRun {
		if own {
			// The Step finalizes the set itself once it is deleted: a dry
			// run lists those writes too (finish writes nothing in one).
			return nil, r.finish(ctx, uid)
		}
		return nil, nil
	}
	return &setWrite{
		send: func(ctx context.Context) (*unstructured.Unstructured, error) {
			return nil, r.e.sets().Delete(ctx, s.Name, metav1.DeleteOptions{
				Preconditions:     &metav1.Preconditions{UID: &uid},
				PropagationPolicy: &policy,
			})
		},
		done: func(ctx context.Context, _ *unstructured.Unstructured, err error) error {
			switch {
			case err == nil:
			case apierrors.IsNotFound(err):
				return nil
			case apierrors.IsConflict(err):
				// The UID precondition failed: the name now holds another
				// object, which this plan did not name. Leave it alone.
				return nil
			default:
				return &SetError{Name: s.Name, Err: fmt.Errorf("retire: %w", err)}
			}
			if own {
				return r.finish(ctx, uid)
			}
			return nil
		},
	}, nil
}

// addFinalizer puts [ExecutorFinalizer] on a set that has no finalizer, on
// condition that it is the set read (UID and resourceVersion): a
// controller that added its own meanwhile makes it a Conflict, and the
// next Step plans again.
func (r *run) addFinalizer(ctx context.Context, s Set) error {
	r.record(Call{Verb: "patch", Resource: r.family.Resource.Resource, Name: s.Name})
	if r.e.DryRun {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": s.UID, "resourceVersion": s.Object.GetResourceVersion(), "finalizers": []string{ExecutorFinalizer},
	}})
	if err != nil {
		return err
	}
	live, err := r.e.sets().Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("retire: add finalizer %s: %w", ExecutorFinalizer, err)}
	}
	r.saw(live)
	return nil
}

// finish finalizes a set the executor retired with its own finalizer, as
// [Executor.Finalize] does: it deletes the obsolete resources the set
// installed without an owner, hands what it owns alone to a live set of
// another family that lists it (the rest the garbage collector takes),
// then removes the finalizer. RBAC objects, and the finalizer's removal
// after them, wait until every other delete of the Step is done (see
// deletedLast).
func (r *run) finish(ctx context.Context, uid types.UID) error {
	sp, ok := r.set(uid)
	if !ok {
		return nil
	}
	sp.Deleting = true
	s := *sp
	// Every obsolete resource, not only those installed without an owner:
	// one the set owns alone that a live set of another family lists goes
	// to that set (see foreign), not to the garbage collector.
	obsolete := r.decide(uid).Of(Delete)
	if err := r.prefetch(ctx, refsOf(obsolete), false); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("finalize: read what it lists: %w", err)}
	}
	return r.inOrder(ctx, obsolete,
		func(ctx context.Context, items []Item) error { return r.settleObsolete(ctx, s, items) },
		func(ctx context.Context) error { return r.dropFinalizer(ctx, s) })
}

// inOrder settles items with settle, then calls then: the deletes of RBAC
// objects among them (see deletedLast), and then after them, wait until
// the end of the Step and run only if everything before succeeded.
func (r *run) inOrder(ctx context.Context, items []Item, settle func(context.Context, []Item) error, then func(context.Context) error) error {
	first, last := splitLast(items)
	if err := settle(ctx, first); err != nil {
		return err
	}
	rest := func(ctx context.Context) error {
		if err := settle(ctx, last); err != nil {
			return err
		}
		return then(ctx)
	}
	if len(last) == 0 {
		return rest(ctx)
	}
	r.last = append(r.last, rest)
	return nil
}

// settleObsolete settles obsolete resources of the retired set s, as
// finish does, and notes what it did.
func (r *run) settleObsolete(ctx context.Context, s Set, items []Item) error {
	others := r.others(s.UID)
	var errs []error
	for _, it := range items {
		if r.outOfTime() {
			return errOutOfTime
		}
		done, what, err := r.settle(ctx, s, others, it, true)
		if err != nil {
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
			continue
		}
		r.note(s.UID, done, what)
	}
	if err := errors.Join(errs...); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("finalize: delete what it installed without an owner: %w", err)}
	}
	return nil
}

// dropFinalizer removes [ExecutorFinalizer] from the set s, if it is
// still the set read (same UID).
func (r *run) dropFinalizer(ctx context.Context, s Set) error {
	r.record(Call{Verb: "update", Resource: r.family.Resource.Resource, Name: s.Name})
	if r.e.DryRun {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r.setReads.gets++
		live, err := r.e.sets().Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil || live.GetUID() != s.UID {
			return err
		}
		fins := slices.DeleteFunc(live.GetFinalizers(), func(f string) bool { return f == ExecutorFinalizer })
		if len(fins) == len(live.GetFinalizers()) {
			return nil
		}
		live.SetFinalizers(fins)
		_, err = r.e.sets().Update(ctx, live, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return &SetError{Name: s.Name, Err: fmt.Errorf("finalize: remove finalizer %s: %w", ExecutorFinalizer, err)}
	}
	return nil
}

// deletedLast reports whether a resource is deleted only after every other
// obsolete resource of a Step, or of a Finalize: the RBAC objects (Roles,
// ClusterRoles and their bindings). An operator whose rights come from
// ClusterRoles it installed itself (aggregated into its own, as knative's
// are) would otherwise lose the right to delete the rest half way, and
// could then not finish.
func deletedLast(ref Ref) bool { return ref.Group == rbacv1.GroupName }

// splitLast splits items into those settled first and the deletes of
// RBAC objects, settled last (see deletedLast), each in the order given.
func splitLast(items []Item) (first, last []Item) {
	for _, it := range items {
		if it.Verdict == Delete && deletedLast(it.Ref) {
			last = append(last, it)
		} else {
			first = append(first, it)
		}
	}
	return first, last
}

// decide returns the finalization decision of the view's set uid, one of
// r.retiring, from one index over the view built for all of them: sets
// retired earlier in the call are being deleted in the view, so they are
// nobody's successor.
func (r *run) decide(uid types.UID) Decision {
	d := r.deciderFor()
	i := slices.IndexFunc(r.view, func(s Set) bool { return s.UID == uid })
	return d.decide(i)
}

func (r *run) deciderFor() *decider {
	if r.decider == nil {
		var idx []int
		for i, s := range r.view {
			if slices.Contains(r.retiring, s.UID) {
				idx = append(idx, i)
			}
		}
		r.decider = newDecider(r.view, idx, r.e.Prune)
	}
	return r.decider
}

// owners returns the ownerReferences a kept resource gets: its successor
// first, then every other set of the view that lists it, is not being
// deleted and is not retired by this call.
func (r *run) owners(it Item, retiring types.UID) []metav1.OwnerReference {
	d := r.deciderFor()
	i := slices.IndexFunc(r.view, func(s Set) bool { return s.UID == retiring })
	out := []metav1.OwnerReference{r.family.OwnerReference(Set{Name: it.Successor, UID: it.SuccessorUID})}
	if k, ok := d.slotOf(i, it.Ref); ok {
		d.listers(k, d.excluded(i), func(j int) bool {
			// Sets this call retires later are going anyway: naming them
			// only costs each a write more when its turn comes.
			if s := r.view[j]; s.UID != it.SuccessorUID && !slices.Contains(r.retiring, s.UID) {
				out = append(out, r.family.OwnerReference(s))
			}
			return true
		})
	}
	return out
}

// retiredRef is a resource as one retired set lists it.
type retiredRef struct {
	set types.UID
	ref Ref
}

// note records in r.retired what a retirement did with a resource, it
// being final: the Step reports it in [Result]. A resource of a kind not
// served is in r.unserved already.
func (r *run) note(set types.UID, it Item, what outcome) {
	if r.detached[retiredRef{set, it.Ref}] {
		it.Detached = true // by the retirement, before the Step finalized the set
	}
	res := &r.retired
	switch what {
	case handedOver:
		res.HandedOver = append(res.HandedOver, it)
	case kept:
		res.Kept = append(res.Kept, it)
	case deleted:
		res.Deleted = append(res.Deleted, it)
	case collected:
		res.Collected = append(res.Collected, it)
	case unserved:
	default:
		res.Skipped = append(res.Skipped, it)
	}
}

// uniqueItems returns items without repeats, in order: a retirement and
// the finalization that follows it in the same Step may both meet a
// resource whose kind is not served.
func uniqueItems(items []Item) []Item {
	seen := make(map[Item]bool, len(items))
	return slices.DeleteFunc(items, func(it Item) bool {
		dup := seen[it]
		seen[it] = true
		return dup
	})
}
