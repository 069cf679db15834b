package handoff

import (
	"cmp"
	"fmt"
	"math/bits"
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
	// PlacementOwners are kinds whose ownerReferences a set controller
	// writes to place an object, not to claim it: an ownerReference to an
	// object of such a kind does not make a listed object someone else's.
	// tektoncd/operator makes the target Namespace the owner of the
	// operator's own webhook configurations (so they go with the
	// Namespace); with {Kind: "Namespace"} here, the last set that lists
	// one deletes it on removal instead of leaving an admission webhook
	// that points at a Service that is gone. Empty: every ownerReference
	// counts.
	PlacementOwners []schema.GroupKind
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
	sets := make([]Set, 0, len(others)+1)
	sets = append(sets, retiring)
	for _, s := range others {
		if s.UID != retiring.UID {
			sets = append(sets, s)
		}
	}
	return newDecider(sets, []int{0}, opts).decide(0)
}

// Finalizations decides the finalization of each retiring set in turn, as
// one Step retires them: a set decided earlier counts as being deleted for
// the later ones, so nothing is kept for a set that is already going.
// family holds every set of the family, the retiring ones included. One
// index over the family serves every decision, so the cost is linear in the
// resources listed, not in their product with the number of sets.
func Finalizations(retiring []Set, family []Set, opts PruneOptions) []Decision {
	sets := slices.Clone(family)
	idx := make([]int, 0, len(retiring))
	for _, r := range retiring {
		i := slices.IndexFunc(sets, func(s Set) bool { return s.UID == r.UID })
		if i < 0 {
			sets = append(sets, r)
			i = len(sets) - 1
		}
		idx = append(idx, i)
	}
	d := newDecider(sets, idx, opts)
	out := make([]Decision, 0, len(idx))
	for _, i := range idx {
		out = append(out, d.decide(i))
		sets[i].Deleting = true
	}
	return out
}

// decider indexes which sets of a family list each resource of the
// retiring ones. Sets take bit positions in order of preference as a
// successor, so the successor of a resource is the lowest bit set among
// the sets not being deleted. It reads Set.Deleting when it decides, so a
// caller marks a set it has retired in sets and decides the next one.
type decider struct {
	sets      []Set
	pos       []int // pos[i]: bit position of sets[i]
	byPos     []int // byPos[p]: index in sets of bit position p
	words     int   // uint64 words per resource
	slots     [][]int32
	bits      []uint64 // words per slot: which sets list its resource
	reasons   []string // per bit position, made on first use
	protected map[schema.GroupKind]bool
}

// newDecider indexes sets for the decisions of sets[retiring[k]]. It makes
// one slot per distinct resource of the retiring sets, then one lookup per
// resource the other sets list.
func newDecider(sets []Set, retiring []int, opts PruneOptions) *decider {
	d := &decider{sets: sets, words: (len(sets) + 63) / 64, slots: make([][]int32, len(sets))}
	d.byPos = make([]int, len(sets))
	for i := range d.byPos {
		d.byPos[i] = i
	}
	slices.SortFunc(d.byPos, func(i, j int) int {
		a, b := &sets[i], &sets[j]
		return cmp.Or(cmpBool(a.Invalid != nil, b.Invalid != nil), cmpBool(a.SupersededBy != "", b.SupersededBy != ""),
			b.Created.Compare(a.Created), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	d.pos = make([]int, len(sets))
	for p, i := range d.byPos {
		d.pos[i] = p
	}
	d.reasons = make([]string, len(sets))
	d.protected = make(map[schema.GroupKind]bool, len(opts.Protected))
	for _, gk := range opts.Protected {
		d.protected[gk] = true
	}
	n := 0
	for _, i := range retiring {
		n += len(sets[i].Resources)
	}
	slot := make(map[Ref]int32, n)
	d.bits = make([]uint64, 0, n*d.words)
	isRetiring := make([]bool, len(sets))
	for _, i := range retiring {
		isRetiring[i] = true
		w, b := d.pos[i]/64, uint64(1)<<(d.pos[i]%64)
		own := make([]int32, 0, len(sets[i].Resources))
		for _, r := range sets[i].Resources {
			k, ok := slot[r]
			if !ok {
				k = int32(len(d.bits) / d.words)
				slot[r] = k
				d.bits = append(d.bits, make([]uint64, d.words)...)
			}
			if d.bits[int(k)*d.words+w]&b != 0 {
				own = append(own, -1) // listed twice by this set: decided once
				continue
			}
			d.bits[int(k)*d.words+w] |= b
			own = append(own, k)
		}
		d.slots[i] = own
	}
	for i, s := range sets {
		if isRetiring[i] {
			continue
		}
		w, b := d.pos[i]/64, uint64(1)<<(d.pos[i]%64)
		for _, r := range s.Resources {
			if k, ok := slot[r]; ok {
				d.bits[int(k)*d.words+w] |= b
			}
		}
	}
	return d
}

// slotOf returns the slot of a resource sets[i] lists.
func (d *decider) slotOf(i int, r Ref) (int32, bool) {
	for n, k := range d.slots[i] {
		if k >= 0 && d.sets[i].Resources[n] == r {
			return k, true
		}
	}
	return 0, false
}

// excluded returns the bit mask of the sets that cannot be successors of
// sets[i]: itself and those being deleted.
func (d *decider) excluded(i int) []uint64 {
	ex := make([]uint64, d.words)
	for j, s := range d.sets {
		if j == i || s.Deleting {
			ex[d.pos[j]/64] |= 1 << (d.pos[j] % 64)
		}
	}
	return ex
}

// listers calls fn with the index in sets of every set that lists the
// resource in slot k and is not excluded, most preferred first, until fn
// returns false.
func (d *decider) listers(k int32, ex []uint64, fn func(i int) bool) {
	row := d.bits[int(k)*d.words : int(k+1)*d.words]
	for w, word := range row {
		for word &^= ex[w]; word != 0; word &= word - 1 {
			if !fn(d.byPos[w*64+bits.TrailingZeros64(word)]) {
				return
			}
		}
	}
}

// decide makes the decision of sets[i], one of the retiring sets.
func (d *decider) decide(i int) Decision {
	s := d.sets[i]
	ex := d.excluded(i)
	out := Decision{Set: s.Name, UID: s.UID, Items: make([]Item, 0, len(s.Resources))}
	for n, k := range d.slots[i] {
		if k < 0 {
			continue
		}
		it := Item{Ref: s.Resources[n]}
		succ := -1
		d.listers(k, ex, func(j int) bool { succ = j; return false })
		switch {
		case succ >= 0:
			t := &d.sets[succ]
			it.Verdict, it.Successor, it.SuccessorUID = Keep, t.Name, t.UID
			p := d.pos[succ]
			if d.reasons[p] == "" {
				// One reason string per successor, not per kept resource:
				// formatting dominated the decision's cost.
				d.reasons[p] = fmt.Sprintf("listed by %s", t)
			}
			it.Reason = d.reasons[p]
		case d.protected[it.Ref.GroupKind()]:
			it.Verdict, it.Reason = Skip, "protected kind"
		default:
			it.Verdict, it.Reason = Delete, "listed by no other set"
		}
		out.Items = append(out.Items, it)
	}
	return out
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
	switch ownerOf(opts.owning(live), retiring, family) {
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
