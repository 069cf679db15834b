package handoff

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Ref identifies a resource by GroupKind, namespace and name. It leaves out
// the version on purpose: an upgrade may move an object from v1beta1 to v1
// and it is still the same object, as manifestival's In filter sees it.
type Ref struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// RefOf returns the identity of an object.
func RefOf(u *unstructured.Unstructured) Ref {
	gk := u.GroupVersionKind().GroupKind()
	return Ref{Group: gk.Group, Kind: gk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// GroupKind returns the reference's group and kind.
func (r Ref) GroupKind() schema.GroupKind { return schema.GroupKind{Group: r.Group, Kind: r.Kind} }

// String renders the reference as Kind.group namespace/name, for example
// "Deployment.apps tekton-pipelines/tekton-pipelines-webhook".
func (r Ref) String() string {
	s := r.Kind
	if r.Group != "" {
		s += "." + r.Group
	}
	s += " "
	if r.Namespace != "" {
		s += r.Namespace + "/"
	}
	return s + r.Name
}

func compareRefs(a, b Ref) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// ownership says who owns a live object, from the point of view of one set.
type ownership string

// The owners an object can have. Only UIDs are compared: a name can be
// reused by a new object, a UID cannot.
const (
	// ownedBySet: every ownerReference names the set in question.
	ownedBySet ownership = "OwnedBySet"
	// ownedByFamily: every ownerReference names a set of the family, and at
	// least one names another set than the one in question.
	ownedByFamily ownership = "OwnedByFamily"
	// ownedByOther: some ownerReference names an object outside the family.
	ownedByOther ownership = "OwnedByOther"
	// notOwned: the object has no ownerReferences at all.
	notOwned ownership = "Unowned"
)

// ownerOf classifies the ownerReferences of a live object relative to set
// and the sets of its family.
func ownerOf(refs []metav1.OwnerReference, set Set, family []Set) ownership {
	if len(refs) == 0 {
		return notOwned
	}
	uids := make(map[types.UID]bool, len(family)+1)
	uids[set.UID] = true
	for _, s := range family {
		uids[s.UID] = true
	}
	result := ownedBySet
	for _, r := range refs {
		switch {
		case !uids[r.UID]:
			return ownedByOther
		case r.UID != set.UID:
			result = ownedByFamily
		}
	}
	return result
}

// handOver moves ownership of an object from the set with UID from to the
// owners to, and returns the new ownerReferences and whether they changed.
//
// The reference to from is removed. A reference to each of to is added if
// it is missing, with blockOwnerDeletion carried over from the removed
// reference. If from was the controller and no other reference is, the
// first of to becomes the controller. Every other reference is kept as it
// is, in its order. With no to, the object simply stops naming from.
//
// Handing an object to every live set that lists it, not to one, keeps it
// from the garbage collector as long as any of them lives: a successor
// retired by a racing reconcile does not take the object with it.
func handOver(refs []metav1.OwnerReference, from types.UID, to ...metav1.OwnerReference) ([]metav1.OwnerReference, bool) {
	var (
		out       = make([]metav1.OwnerReference, 0, len(refs)+len(to))
		fromRef   *metav1.OwnerReference
		otherCtrl bool
		changed   bool
	)
	for i := range refs {
		r := refs[i]
		switch {
		case r.UID == from:
			fromRef = &refs[i]
			changed = true
			continue
		case r.Controller != nil && *r.Controller:
			otherCtrl = true
		}
		out = append(out, r)
	}
	first := -1
	for i, t := range to {
		idx := slices.IndexFunc(out, func(r metav1.OwnerReference) bool { return r.UID == t.UID })
		if idx < 0 {
			n := t
			n.Controller, n.BlockOwnerDeletion = nil, nil
			if fromRef != nil {
				n.BlockOwnerDeletion = fromRef.BlockOwnerDeletion
			}
			out = append(out, n)
			idx = len(out) - 1
			changed = true
		}
		if i == 0 {
			first = idx
		}
	}
	if first >= 0 && fromRef != nil && fromRef.Controller != nil && *fromRef.Controller && !otherCtrl {
		if c := out[first].Controller; c == nil || !*c {
			t := true
			out[first].Controller = &t
			changed = true
		}
	}
	return out, changed
}

// OwnerReference returns a controller reference to a set, as a set controller
// writes it on the resources it installs.
func (f Family) OwnerReference(s Set) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion:         f.Resource.GroupVersion().String(),
		Kind:               f.Kind,
		Name:               s.Name,
		UID:                s.UID,
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}
}

// owning returns the ownerReferences of live that say who owns it: all but
// those to a kind in [PruneOptions.PlacementOwners] and to one of
// [PruneOptions.Owners].
func (o PruneOptions) owning(live *unstructured.Unstructured) []metav1.OwnerReference {
	refs := live.GetOwnerReferences()
	if len(o.PlacementOwners) == 0 && len(o.Owners) == 0 {
		return refs
	}
	return slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool {
		if slices.Contains(o.Owners, r.UID) {
			return true
		}
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		return err == nil && slices.Contains(o.PlacementOwners, schema.GroupKind{Group: gv.Group, Kind: r.Kind})
	})
}
