package handoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// This file holds the settling of one resource a retiring set lists, and the
// sets of other families that may hold it.

// outcome is what settle did with one resource.
type outcome int

const (
	skipped    outcome = iota // nothing written: left alone, or gone
	handedOver                // its owners changed: the retiring set's reference moved to live sets that list it
	kept                      // a live set lists it and it needed no write: the retiring set did not own it, or it is gone
	deleted                   // deleted (or, in a dry run, would be)
	collected                 // obsolete and owned by the retiring set alone: the garbage collector deletes it with the set
	unserved                  // its kind is not served: no object can exist
)

// settle makes one resource the retiring set lists safe for the set to go,
// and returns the item as carried out and what happened:
//
//   - Keep: the resource moves to its successor (ownerReference handover);
//   - a protected or keep-annotated resource stops naming the set, so the
//     garbage collector does not take it when the set goes;
//   - with del (Finalize), an obsolete resource is deleted when
//     [liveVerdict] allows it and no live set of another family lists it or
//     last wrote it (see foreign); one the retiring set owns is handed to
//     that set instead.
//
// A resource that is gone needs nothing; so does one whose kind is not
// served, unless a live set lists it: then Objects cannot reach an object
// that must be handed over, which is an error.
func (r *run) settle(ctx context.Context, retiring Set, others []Set, it Item, del bool) (Item, outcome, error) {
	if r.objects == nil {
		return it, skipped, fmt.Errorf("%w: executor needs Objects, or Dynamic and Mapper, to reach resources", ErrInvalidFamily)
	}
	fresh := false // read from the API server, not from what prefetch read
	for attempt := 0; ; attempt++ {
		live, err := r.get(ctx, it.Ref, fresh)
		switch {
		case errors.Is(err, ErrNotServed) && it.Verdict == Keep:
			return it, skipped, fmt.Errorf("listed by live set %s, not handed over: %w", it.Successor, err)
		case errors.Is(err, ErrNotServed):
			it.Verdict, it.Reason = Skip, "kind is not served"
			r.unserved = append(r.unserved, it)
			return it, unserved, nil
		case apierrors.IsNotFound(err) && it.Verdict == Keep:
			return it, kept, nil
		case apierrors.IsNotFound(err):
			it.Verdict, it.Reason = Skip, "already gone"
			return it, skipped, nil
		case err != nil:
			var de *DiscoveryError
			if errors.As(err, &de) && !slices.Contains(r.live.reads.Undiscovered, de.Group) {
				r.live.reads.Undiscovered = append(r.live.reads.Undiscovered, de.Group)
			}
			return it, skipped, err
		}
		refs := live.GetOwnerReferences()
		var next []metav1.OwnerReference
		switch verdict, reason := liveVerdict(it, live, retiring, others, r.e.Prune); {
		case it.Verdict == Keep:
			if !ownedBy(refs, retiring.UID) {
				if slices.Contains(strings.Split(live.GetAnnotations()[ReleasedAnnotation], ","), string(retiring.UID)) {
					return it, handedOver, nil // by an earlier attempt or call
				}
				return it, kept, nil
			}
			next, _ = handOver(refs, retiring.UID, r.owners(it, retiring.UID)...)
		case r.e.Prune.keeps(it.Ref.GroupKind(), live):
			it.Verdict, it.Reason = Skip, reason
			// Release it from every set of the family that is going, not
			// only this one: another deleting owner would take it later;
			// and from the component objects of Prune.Owners, which own
			// what the family applied (no set lists it any more, so the
			// component's removal must not take it either).
			next = slices.DeleteFunc(slices.Clone(refs), func(o metav1.OwnerReference) bool {
				s, ok := r.set(o.UID)
				return o.UID == retiring.UID || (ok && s.Deleting) || slices.Contains(r.e.Prune.Owners, o.UID)
			})
			if len(next) == len(refs) {
				return it, skipped, nil
			}
			it.Detached = true
		case verdict == Delete && del:
			other, why, err := r.foreign(ctx, it.Ref, live)
			switch {
			case err != nil:
				return it, skipped, err
			case other == nil && retiring.UID != r.staying && ownerOf(refs, retiring, others) == ownedBySet:
				// (refs, not just the owning ones: a placement owner such
				// as a Namespace would keep it from the collector.)
				// The garbage collector deletes it once the set is gone:
				// a delete here would be a write it does not need.
				it.Verdict, it.Reason = Delete, "owned by "+retiring.Name+" alone, listed by no other set: left to the garbage collector"
				return it, collected, nil
			case other == nil && !fresh:
				// Nothing else removes it: confirm on the API server first.
				fresh = true
				continue
			case other == nil:
				it.Verdict, it.Reason = verdict, reason
				err := r.delete(ctx, live, &it)
				if apierrors.IsConflict(err) && attempt < retry.DefaultRetry.Steps {
					// The UID precondition failed (or the server refused
					// for another conflict): whatever holds the name now is
					// decided again from a fresh read.
					continue
				}
				if err != nil || it.Verdict != Delete {
					return it, skipped, err
				}
				return it, deleted, nil
			case !ownedBy(refs, retiring.UID):
				it.Verdict, it.Reason = Skip, why
				return it, skipped, nil
			}
			// Owned by the retiring set alone: the garbage collector would
			// take it with the set, so it goes to the other family's set.
			it.Verdict, it.Successor, it.SuccessorUID, it.Reason = Keep, other.Name, other.UID, why
			next, _ = handOver(refs, retiring.UID, r.family.OwnerReference(*other))
		default:
			it.Verdict, it.Reason = verdict, reason
			return it, skipped, nil
		}
		done := skipped
		if it.Verdict == Keep {
			done = handedOver
		}
		r.record(Call{Verb: "patch", Resource: r.resourceName(it.Ref), Namespace: it.Ref.Namespace, Name: it.Ref.Name})
		if r.e.DryRun {
			return it, done, nil
		}
		live = live.DeepCopy()
		ann := live.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[ReleasedAnnotation] = released(ann[ReleasedAnnotation], retiring.UID)
		live.SetAnnotations(ann)
		r.wrote(it.Ref)
		err = r.objects.SetOwnerReferences(ctx, live, next)
		if apierrors.IsConflict(err) && attempt < retry.DefaultRetry.Steps {
			fresh = true
			continue // read again and decide again
		}
		if apierrors.IsNotFound(err) {
			if it.Verdict == Keep {
				return it, kept, nil
			}
			return it, skipped, nil
		}
		return it, done, err
	}
}

// delete deletes live, the object of a Delete item, on condition of its UID.
func (r *run) delete(ctx context.Context, live *unstructured.Unstructured, it *Item) error {
	r.record(Call{Verb: "delete", Resource: r.resourceName(it.Ref), Namespace: it.Ref.Namespace, Name: it.Ref.Name})
	if r.e.DryRun {
		return nil
	}
	r.wrote(it.Ref)
	policy := r.e.ResourcePropagation
	if policy == "" {
		policy = metav1.DeletePropagationBackground
	}
	err := r.objects.Delete(ctx, it.Ref, live.GetUID(), policy)
	if apierrors.IsNotFound(err) {
		it.Verdict, it.Reason = Skip, "gone before the delete"
		return nil
	}
	return err // a Conflict: the caller reads the object again and decides anew
}

// resourceName names a resource's REST resource for a Call, from the
// mapper where there is one, else from its kind.
func (r *run) resourceName(ref Ref) string {
	if r.e.Mapper != nil {
		if m, err := r.e.Mapper.RESTMapping(ref.GroupKind()); err == nil {
			return m.Resource.Resource
		}
	}
	plural, _ := meta.UnsafeGuessKindToResource(ref.GroupKind().WithVersion(""))
	return plural.Resource
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// foreign returns a live set of the family's set kind outside the family
// that lists ref, or whose UID the live object's [WriterAnnotation] names,
// with the reason to leave the object to it; nil when there is none. Such
// an object is not this family's to delete: families can share an object
// (an admission webhook two components serve), and the set that last
// wrote it or still lists it serves it. It lists the set kind once per
// call, on the first object it is asked about, so an operator with one
// family pays nothing until something is about to be deleted.
func (r *run) foreign(ctx context.Context, ref Ref, live *unstructured.Unstructured) (*Set, string, error) {
	if !r.strangersRead {
		list, err := r.listAll(ctx)
		if err != nil {
			return nil, "", err
		}
		r.readStrangers(list.Items)
	}
	if i, ok := r.byRef[ref]; ok {
		s := &r.strangers[i]
		return s, fmt.Sprintf("listed by %s of another family", s.Name), nil
	}
	if w := parseStamp(live.GetAnnotations()[WriterAnnotation]).uid; w != "" {
		for i := range r.strangers {
			if s := &r.strangers[i]; s.UID == w {
				return s, fmt.Sprintf("last written by live set %s of another family", s.Name), nil
			}
		}
	}
	return nil, "", nil
}

// readStrangers keeps, of a List of every set of the kind, the live sets
// outside the family, for foreign.
func (r *run) readStrangers(items []unstructured.Unstructured) {
	r.strangers, r.byRef = nil, map[Ref]int{}
	for i := range items {
		u := &items[i]
		if r.family.Contains(u.GetLabels()) || u.GetDeletionTimestamp() != nil {
			continue
		}
		// What a set of another family lists is read in this family's
		// way: the kind is the same. What cannot be read is left out.
		refs, _ := r.family.resources(u)
		r.strangers = append(r.strangers, Set{Name: u.GetName(), UID: u.GetUID(), Created: u.GetCreationTimestamp().Time, Resources: refs, Labels: u.GetLabels(), Object: u})
		for _, ref := range refs {
			if _, ok := r.byRef[ref]; !ok {
				r.byRef[ref] = len(r.strangers) - 1
			}
		}
	}
	r.strangersRead = true
}

// listAll lists every set of the kind, whatever its family: every object
// of the set resource that carries [Family.KindSelector].
func (r *run) listAll(ctx context.Context) (*unstructured.UnstructuredList, error) {
	r.setReads.lists++
	opts := metav1.ListOptions{}
	if len(r.family.KindSelector) > 0 {
		opts.LabelSelector = labels.SelectorFromSet(r.family.KindSelector).String()
	}
	list, err := r.e.sets().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list every %s (%s): %w", r.family.Resource.Resource, opts.LabelSelector, err)
	}
	return list, nil
}
