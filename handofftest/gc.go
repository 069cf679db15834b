package handofftest

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CollectGarbage runs the garbage collector until it has nothing left to
// do, at the current clock time, as the real collector would eventually:
//
//   - an object none of whose owners exists any more (by UID) is deleted,
//     in Foreground if an owner waits for it (foregroundDeletion) and it
//     has dependents of its own, otherwise in Background;
//   - an object with a live owner loses its references to missing owners
//     and to owners being deleted in Foreground;
//   - an object being deleted in Foreground loses its foregroundDeletion
//     finalizer once no dependent with blockOwnerDeletion remains, and is
//     removed if no other finalizer is left;
//   - an object being deleted with the orphan finalizer has its
//     dependents' references to it dropped, then the finalizer.
//
// An owner being deleted without foregroundDeletion still counts as live;
// an object already being deleted keeps its references. Owner references
// to kinds the cluster does not know are taken as live.
// The cluster runs this after every write unless built [WithoutAutoGC].
func (c *Cluster) CollectGarbage() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.collect(c.now)
}

func (c *Cluster) collect(now time.Time) {
	for c.gcPass(now) {
	}
}

type ownerState int

const (
	ownerLive ownerState = iota
	ownerGone
	ownerWaiting // being deleted in Foreground
)

func (c *Cluster) ownerState(dep *unstructured.Unstructured, ref metav1.OwnerReference) ownerState {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ownerLive
	}
	k, ok := c.byGK[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	if !ok {
		return ownerLive
	}
	if k.namespaced && dep.GetNamespace() == "" {
		return ownerGone // a cluster-scoped object cannot have a namespaced owner
	}
	owner, ok := c.objects[k.key(dep.GetNamespace(), ref.Name)]
	if !ok || owner.GetUID() != ref.UID {
		return ownerGone
	}
	if owner.GetDeletionTimestamp() != nil && slices.Contains(owner.GetFinalizers(), FinalizerForeground) {
		return ownerWaiting
	}
	return ownerLive
}

// gcPass makes one sweep over all objects and reports whether it changed
// anything.
func (c *Cluster) gcPass(now time.Time) bool {
	patch := event{now: now, actor: GCActor, verb: "patch"}
	del := event{now: now, actor: GCActor, verb: "delete"}
	changed := false
	for _, key := range c.sortedKeys() {
		obj, ok := c.objects[key]
		if !ok {
			continue
		}
		if obj.GetDeletionTimestamp() != nil && slices.Contains(obj.GetFinalizers(), FinalizerOrphan) {
			c.orphanDependents(now, obj)
			c.dropFinalizer(patch, key, FinalizerOrphan)
			changed = true
			continue
		}
		refs := obj.GetOwnerReferences()
		if len(refs) == 0 || obj.GetDeletionTimestamp() != nil {
			continue
		}
		var live []metav1.OwnerReference
		waiting := false
		for _, r := range refs {
			switch c.ownerState(obj, r) {
			case ownerLive:
				live = append(live, r)
			case ownerWaiting:
				waiting = true
			}
		}
		switch {
		case len(live) == len(refs):
		case len(live) > 0:
			next := obj.DeepCopy()
			next.SetOwnerReferences(live)
			c.store(patch, Updated, key, next)
			changed = true
		default:
			policy := metav1.DeletePropagationBackground
			if waiting && c.hasDependents(obj, false) {
				policy = metav1.DeletePropagationForeground
			}
			c.markOrRemove(del, key, policy)
			changed = true
		}
	}
	for _, key := range c.sortedKeys() {
		obj, ok := c.objects[key]
		if !ok || obj.GetDeletionTimestamp() == nil || !slices.Contains(obj.GetFinalizers(), FinalizerForeground) {
			continue
		}
		if !c.hasDependents(obj, true) {
			c.dropFinalizer(patch, key, FinalizerForeground)
			changed = true
		}
	}
	return changed
}

// hasDependents reports whether any object refers to owner, with
// blockOwnerDeletion if blocking.
func (c *Cluster) hasDependents(owner *unstructured.Unstructured, blocking bool) bool {
	for _, o := range c.objects {
		for _, r := range o.GetOwnerReferences() {
			if r.UID != owner.GetUID() {
				continue
			}
			if !blocking || (r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion) {
				return true
			}
		}
	}
	return false
}

// orphanDependents drops every owner reference to owner.
func (c *Cluster) orphanDependents(now time.Time, owner *unstructured.Unstructured) {
	ev := event{now: now, actor: GCActor, verb: "patch"}
	for _, key := range c.sortedKeys() {
		obj := c.objects[key]
		refs := obj.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return r.UID == owner.GetUID() })
		if len(kept) == len(refs) {
			continue
		}
		if len(kept) == 0 {
			kept = nil
		}
		next := obj.DeepCopy()
		next.SetOwnerReferences(kept)
		c.store(ev, Updated, key, next)
	}
}

// dropFinalizer removes a finalizer, and the object if it was the last
// one of an object being deleted.
func (c *Cluster) dropFinalizer(ev event, key Key, finalizer string) {
	next := c.objects[key].DeepCopy()
	fins := slices.DeleteFunc(next.GetFinalizers(), func(f string) bool { return f == finalizer })
	if len(fins) == 0 {
		fins = nil
	}
	next.SetFinalizers(fins)
	c.store(ev, Updated, key, next)
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		c.remove(ev, key)
	}
}
