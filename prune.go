package handoff

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultKeepAnnotation, set to [KeepValue] on a live resource, keeps it
// when the set that lists it is finalized, in the spirit of
// helm.sh/resource-policy: keep and cli-utils.sigs.k8s.io/on-remove: keep.
const (
	DefaultKeepAnnotation = "handoff.kube-handoff.io/on-remove"
	KeepValue             = "keep"
)

// PruneOptions say what finalizing a set may delete.
//
// The zero value protects no kind, honours no keep annotation and deletes
// no object without an ownerReference; [DefaultPruneOptions] is what
// tektoncd/operator needs.
type PruneOptions struct {
	// Protected kinds are never deleted.
	Protected []schema.GroupKind
	// KeepAnnotation, when set to [KeepValue] on a live object, keeps it.
	KeepAnnotation string
	// Unowned are the kinds a set controller installs without an
	// ownerReference. A live object of such a kind with no ownerReference
	// at all is deleted when no other set lists it; objects of other kinds
	// are deleted only when the retiring set owns them.
	Unowned []schema.GroupKind
}

// DefaultPruneOptions protects Namespaces, PersistentVolumeClaims and
// CustomResourceDefinitions (as tektoncd/operator's finalizer does), honours
// [DefaultKeepAnnotation], and treats admission webhook configurations and
// APIServices as installed without an owner.
func DefaultPruneOptions() PruneOptions {
	return PruneOptions{
		Protected: []schema.GroupKind{
			{Kind: "Namespace"},
			{Kind: "PersistentVolumeClaim"},
			{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
		},
		KeepAnnotation: DefaultKeepAnnotation,
		Unowned: []schema.GroupKind{
			{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
			{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
			{Group: "apiregistration.k8s.io", Kind: "APIService"},
		},
	}
}

// Verdict is what finalization does with one listed resource.
type Verdict string

// The verdicts of [Finalization].
const (
	// Delete: no live set of the family lists the resource any more.
	Delete Verdict = "Delete"
	// Keep: a live successor lists it; ownership moves to that successor.
	Keep Verdict = "Keep"
	// Skip: never touched, for the reason given.
	Skip Verdict = "Skip"
)

// Item is the verdict on one resource.
type Item struct {
	Ref     Ref
	Verdict Verdict
	// Successor names the set that keeps the resource (Keep only).
	Successor    string
	SuccessorUID types.UID
	Reason       string
	// Detached is true when the resource was kept in place (protected
	// kind or keep annotation) and its ownerReference to the retiring set
	// was removed, so the garbage collector does not take it.
	Detached bool
}

// String renders the item for a log line.
func (it Item) String() string {
	s := fmt.Sprintf("%s %s", it.Verdict, it.Ref)
	if it.Reason != "" {
		s += ": " + it.Reason
	}
	return s
}

// Decision is what finalizing one set does, resource by resource, in the
// order the set lists them.
type Decision struct {
	Set   string
	UID   types.UID
	Items []Item
}

// Of returns the items with one verdict.
func (d Decision) Of(v Verdict) []Item {
	var out []Item
	for _, it := range d.Items {
		if it.Verdict == v {
			out = append(out, it)
		}
	}
	return out
}

// String renders the decision, one item a line.
func (d Decision) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "finalize %s: %d keep, %d delete, %d skip\n", d.Set,
		len(d.Of(Keep)), len(d.Of(Delete)), len(d.Of(Skip)))
	for _, it := range d.Items {
		b.WriteString("  " + it.String() + "\n")
	}
	return b.String()
}

// Finalization decides, for each resource the retiring set lists, whether
// finalizing it deletes, keeps or skips the resource. It is pure and looks
// only at what sets list; the live checks ([LiveVerdict]) come after.
//
// A resource is kept when any other set of the family that is not being
// deleted lists it: a newer generation, or a sibling of the same generation.
// Of several, the successor is a valid set before an invalid one (see
// [Set.Invalid]), then one that is not superseded, then the newest, then
// the first by name. Only what no such set lists is deleted;
// with no other set left (the component is removed) that is everything.
// Protected kinds are skipped. Repeated entries are decided once.
func Finalization(retiring Set, others []Set, opts PruneOptions) Decision {
	cands := make([]Set, 0, len(others))
	for _, s := range others {
		if s.UID != retiring.UID && !s.Deleting {
			cands = append(cands, s)
		}
	}
	slices.SortFunc(cands, func(a, b Set) int {
		return cmp.Or(cmpBool(a.Invalid != nil, b.Invalid != nil), cmpBool(a.SupersededBy != "", b.SupersededBy != ""),
			b.Created.Compare(a.Created), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	need := make(map[Ref]int, len(retiring.Resources))
	for _, r := range retiring.Resources {
		need[r] = -1
	}
	for i, s := range cands {
		for _, r := range s.Resources {
			if j, ok := need[r]; ok && j < 0 {
				need[r] = i
			}
		}
	}
	protected := make(map[schema.GroupKind]bool, len(opts.Protected))
	for _, gk := range opts.Protected {
		protected[gk] = true
	}
	d := Decision{Set: retiring.Name, UID: retiring.UID, Items: make([]Item, 0, len(need))}
	// One reason string per successor, not per kept resource: formatting
	// dominated the decision's cost.
	reasons := make([]string, len(cands))
	for _, r := range retiring.Resources {
		i, pending := need[r]
		if !pending {
			continue
		}
		delete(need, r)
		it := Item{Ref: r}
		switch {
		case i >= 0:
			s := cands[i]
			it.Verdict, it.Successor, it.SuccessorUID = Keep, s.Name, s.UID
			if reasons[i] == "" {
				reasons[i] = fmt.Sprintf("listed by %s", s)
			}
			it.Reason = reasons[i]
		case protected[r.GroupKind()]:
			it.Verdict, it.Reason = Skip, "protected kind"
		default:
			it.Verdict, it.Reason = Delete, "listed by no other set"
		}
		d.Items = append(d.Items, it)
	}
	return d
}

// LiveVerdict checks a Delete item against the live object before anything
// is deleted, and returns Delete only if that is safe: the object carries no
// keep annotation and either the retiring set is its only owner
// ([OwnedBySet]), or it has no owner and its kind is one a set controller
// installs without one. family is the other sets of the family; live nil
// means the object is gone, which needs nothing. Other verdicts pass through.
func LiveVerdict(it Item, live *unstructured.Unstructured, retiring Set, family []Set, opts PruneOptions) (Verdict, string) {
	if it.Verdict != Delete {
		return it.Verdict, it.Reason
	}
	if live == nil {
		return Skip, "already gone"
	}
	if opts.KeepAnnotation != "" && live.GetAnnotations()[opts.KeepAnnotation] == KeepValue {
		return Skip, fmt.Sprintf("annotated %s=%s", opts.KeepAnnotation, KeepValue)
	}
	switch OwnerOf(live, retiring, family) {
	case OwnedBySet:
		return Delete, "owned by " + retiring.Name + " alone, listed by no other set"
	case Unowned:
		if slices.Contains(opts.Unowned, it.Ref.GroupKind()) {
			return Delete, "installed without an owner, listed by no other set"
		}
		return Skip, "has no owner and its kind is not installed without one"
	case OwnedByFamily:
		return Skip, "owned by another set of the family"
	default:
		return Skip, "owned by an object outside the family"
	}
}

// keeps reports whether a live object stays when its set goes whatever
// lists it: a protected kind, or the keep annotation.
func (o PruneOptions) keeps(gk schema.GroupKind, live *unstructured.Unstructured) bool {
	return slices.Contains(o.Protected, gk) ||
		(o.KeepAnnotation != "" && live.GetAnnotations()[o.KeepAnnotation] == KeepValue)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
