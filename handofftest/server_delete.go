package handofftest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file holds the API-server semantics of deletes. Every function here
// runs with c.mu held.

func (c *Cluster) delete(ev event, gvr schema.GroupVersionResource, ns, name string, opts metav1.DeleteOptions) error {
	if err := dryRunError(opts.DryRun); err != nil {
		return err
	}
	k, err := c.resolve(gvr, ns, false)
	if err != nil {
		return err
	}
	return c.deleteObject(ev, k, k.key(ns, name), opts)
}

func (c *Cluster) deleteObject(ev event, k kindInfo, key Key, opts metav1.DeleteOptions) error {
	gr := k.gvr.GroupResource()
	obj, ok := c.objects[key]
	if !ok {
		return apierrors.NewNotFound(gr, key.Name)
	}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != obj.GetUID() {
			return apierrors.NewConflict(gr, key.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, obj.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != obj.GetResourceVersion() {
			return apierrors.NewConflict(gr, key.Name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, obj.GetResourceVersion()))
		}
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case opts.PropagationPolicy != nil:
		policy = *opts.PropagationPolicy
	case opts.OrphanDependents != nil && *opts.OrphanDependents:
		policy = metav1.DeletePropagationOrphan
	}
	switch policy {
	case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("handofftest: unknown propagationPolicy %q", policy))
	}
	c.markOrRemove(ev, key, policy)
	c.afterWrite(ev)
	return nil
}

// markOrRemove deletes the object at key with the given propagation: it
// is removed at once when it has no finalizers, otherwise it gets a
// deletionTimestamp.
func (c *Cluster) markOrRemove(ev event, key Key, policy metav1.DeletionPropagation) {
	obj := c.objects[key]
	if policy == metav1.DeletePropagationOrphan {
		c.orphanDependents(ev.now, obj)
	}
	next := obj.DeepCopy()
	fins := next.GetFinalizers()
	if policy == metav1.DeletePropagationForeground && !slices.Contains(fins, FinalizerForeground) {
		fins = append(fins, FinalizerForeground)
		next.SetFinalizers(fins)
	}
	if len(fins) == 0 {
		c.remove(ev, key)
		return
	}
	effect := Updated
	if next.GetDeletionTimestamp() == nil {
		ts := metav1.NewTime(ev.now)
		next.SetDeletionTimestamp(&ts)
		zero := int64(0)
		next.SetDeletionGracePeriodSeconds(&zero)
		if g := next.GetGeneration(); g > 0 {
			next.SetGeneration(g + 1)
		}
		effect = Deleting
	}
	if reflect.DeepEqual(next.Object, obj.Object) {
		return
	}
	c.store(ev, effect, key, next)
}

func (c *Cluster) deleteCollection(ev event, gvr schema.GroupVersionResource, ns string, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	if err := dryRunError(opts.DryRun); err != nil {
		return err
	}
	k, err := c.resolve(gvr, ns, true)
	if err != nil {
		return err
	}
	keys, err := c.selected(k, ns, listOpts)
	if err != nil {
		return err
	}
	var errs []error
	for _, key := range keys {
		if _, ok := c.objects[key]; !ok {
			continue // collected while deleting an earlier one
		}
		if err := c.deleteObject(ev, k, key, opts); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
