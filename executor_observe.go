package handoff

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds the view: the family as a call reads, confirms and probes
// it, and the plan made from it.

// observeCache reads the family from the executor's cache.
func (r *run) observeCache() error {
	fam := r.family
	objs, err := r.e.Cache.List(fam.LabelSelector())
	if err != nil {
		return fmt.Errorf("list %s with %s from the cache: %w", fam.Resource.Resource, fam.LabelSelector(), err)
	}
	items := make([]unstructured.Unstructured, len(objs))
	r.cached = make(map[types.UID]string, len(objs))
	for i, o := range objs {
		items[i] = *o
		r.cached[o.GetUID()] = o.GetResourceVersion()
	}
	r.view, _ = fam.ObserveAll(items)
	r.decider = nil
	return nil
}

// observe lists the family with one List call. Sets that cannot be read
// whole are in the view, with Set.Invalid.
func (r *run) observe(ctx context.Context) error {
	fam := r.family
	r.setReads.lists++
	list, err := r.e.sets().List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
	if err != nil {
		return fmt.Errorf("list %s with %s: %w", fam.Resource.Resource, fam.LabelSelector(), err)
	}
	r.view, _ = fam.ObserveAll(list.Items)
	r.decider = nil
	return nil
}

// cacheCurrent reports whether the API server holds exactly the sets the
// cache gave the view, each at the resourceVersion the cache holds: one
// List of the family's metadata alone. Without a client of the sets'
// metadata it reports false, and the caller lists the sets whole.
func (r *run) cacheCurrent(ctx context.Context) (bool, error) {
	md := r.e.setsMetadata()
	if md == nil {
		return false, nil
	}
	fam := r.family
	r.setReads.lists++
	list, err := md.List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
	if err != nil {
		return false, fmt.Errorf("list the metadata of %s with %s: %w", fam.Resource.Resource, fam.LabelSelector(), err)
	}
	if len(list.Items) != len(r.cached) {
		return false, nil
	}
	for _, it := range list.Items {
		if rv, ok := r.cached[it.UID]; !ok || rv != it.ResourceVersion {
			return false, nil
		}
	}
	return true, nil
}

// observeWide lists every set of the kind with one List call: the family
// becomes the view, as observe makes it, and the rest the strangers.
func (r *run) observeWide(ctx context.Context) error {
	fam := r.family
	list, err := r.listAll(ctx)
	if err != nil {
		return err
	}
	mine := make([]unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		if fam.Contains(list.Items[i].GetLabels()) {
			mine = append(mine, list.Items[i])
		}
	}
	r.view, _ = fam.ObserveAll(mine)
	r.decider = nil
	r.readStrangers(list.Items)
	return nil
}

// setNamed returns the view's set of a name, and whether there is one.
func (r *run) setNamed(name string) (Set, bool) {
	for _, s := range r.view {
		if s.Name == name && name != "" {
			return s, true
		}
	}
	return Set{}, false
}

// set returns the view's set with a UID, and whether there is one.
func (r *run) set(uid types.UID) (*Set, bool) {
	for i := range r.view {
		if r.view[i].UID == uid {
			return &r.view[i], true
		}
	}
	return nil, false
}

// viewed returns the object of the view's set uid as read; nil when the
// view has no such set or it was not read whole.
func (r *run) viewed(uid types.UID) *unstructured.Unstructured {
	if s, ok := r.set(uid); ok && s.Invalid == nil {
		return s.Object
	}
	return nil
}

// others returns the sets of the view other than uid.
func (r *run) others(uid types.UID) []Set {
	out := make([]Set, 0, len(r.view))
	for _, s := range r.view {
		if s.UID != uid {
			out = append(out, s)
		}
	}
	return out
}

// saw puts a set as this call wrote it into the view.
func (r *run) saw(obj *unstructured.Unstructured) {
	if obj == nil {
		return
	}
	s, _ := r.family.Observe(obj)
	r.decider = nil
	if cur, ok := r.set(s.UID); ok {
		*cur = s
		return
	}
	r.view = append(r.view, s)
}

// probeObjects gives each live set of the view whose family's probe is an
// [ObjectProbe] the readiness of the objects it lists: it reads those the
// probe selects (one List per kind and namespace, through prefetch, so the
// retirement that may follow reuses what it read) and asks the probe. A
// set being deleted or superseded keeps what Observe said of it.
func (r *run) probeObjects(ctx context.Context) error {
	probe, ok := r.family.Probe.(ObjectProbe)
	if !ok {
		return nil
	}
	probed := func(s Set) bool { return s.Invalid == nil && !s.Deleting && s.SupersededBy == "" }
	var refs []Ref
	for _, s := range r.view {
		if probed(s) {
			for _, ref := range s.Resources {
				if probe.Reads(ref) {
					refs = append(refs, ref)
				}
			}
		}
	}
	if len(refs) > 0 && r.objects == nil {
		return fmt.Errorf("%w: executor needs Objects, or Dynamic and Mapper, to read what an ObjectProbe decides from", ErrInvalidFamily)
	}
	if err := r.prefetch(ctx, refs, true); err != nil {
		return fmt.Errorf("read the objects the sets' readiness depends on: %w", err)
	}
	for i := range r.view {
		s := &r.view[i]
		if probed(*s) {
			s.Readiness = probe.ReadyFrom(*s, func(ref Ref) (*unstructured.Unstructured, error) {
				// (Never an object read with metadata alone.)
				return r.get(ctx, ref, r.live.partial[scopeOf(ref)])
			})
		}
	}
	return nil
}

// plan plans from the view, leaving out (and reporting) invalid sets.
func (r *run) plan(desired *Desired) (Result, Plan, error) {
	valid := make([]Set, 0, len(r.view))
	var res Result
	for _, s := range r.view {
		if s.Invalid != nil {
			res.Invalid = append(res.Invalid, s)
			continue
		}
		valid = append(valid, s)
	}
	plan, err := Planner{Family: r.family, RoleOrder: r.e.RoleOrder}.Plan(valid, desired)
	if err != nil {
		return res, plan, errors.Join(err, res.invalid())
	}
	res.Plan, res.Requeue, res.Waiting = plan, !plan.Settled(), plan.Of(ActionWait)
	return res, plan, nil
}

func (res Result) invalid() error {
	errs := make([]error, 0, len(res.Invalid))
	for _, s := range res.Invalid {
		errs = append(errs, s.Invalid)
	}
	return errors.Join(errs...)
}
