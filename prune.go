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
	// Owners are objects, by UID, whose ownerReferences mark what the
	// family installed, as the family's sets' do: the component object
	// that an operator without set objects makes the owner of what it
	// applies (knative/operator's KnativeServing, its "legacy owner"). An
	// object they alone own counts as installed without an owner (see
	// Unowned and AnyUnowned), and the garbage collector does not take it
	// while the owner lives. Its ownerReferences are rewritten in one case
	// only: a protected or keep-annotated object no live set lists any more
	// loses its references to Owners, so removing the component does not
	// take what it was told to keep.
	//
	// Owners requires AnyUnowned ([Executor.Validate] refuses it alone,
	// naming Executor.Prune.Owners): an operator that owns what it applies
	// by its component object owns every kind so, and with Unowned alone
	// an object of another kind that only the owner owns would be left
	// behind on every retirement, with no error. Keep what must stay with
	// Protected or the keep annotation instead. Package inventory's
	// Inventory.PruneOptions sets both.
	Owners []types.UID
	// AnyUnowned makes every kind one installed without an ownerReference
	// (see Unowned): for sets that own nothing, such as inventory sets,
	// whatever the family applied has no set owner.
	AnyUnowned bool
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

// The verdicts of a finalization ([FinalizeResult.Decision]).
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
	// kind or keep annotation) and its ownerReferences to the retiring set
	// (and to the other sets being deleted, and to [PruneOptions.Owners])
	// were removed, so the garbage collector does not take it.
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

// finalization decides, for each resource the retiring set lists, and
// each an update in place dropped from it that is still to be pruned
// ([Set.Dropped]), whether finalizing it deletes, keeps or skips the
// resource. It is pure and looks only at what sets list; the live checks
// ([liveVerdict]) come after.
//
// A resource is kept when any other set of the family that is not being
// deleted lists it (a newer generation, or a sibling of the same
// generation) or still has to prune it ([Set.Dropped]: that set's prune
// deletes it once the set is Ready for the spec that dropped it, not
// before).
// Of several, the successor is a valid set before an invalid one (see
// [Set.Invalid]), then one that is not superseded, then the newest, then
// the first by name. Only what no such set lists is deleted;
// with no other set left (the component is removed) that is everything.
// Protected kinds are skipped. Repeated entries are decided once.
func finalization(retiring Set, others []Set, opts PruneOptions) Decision {
	sets := make([]Set, 0, len(others)+1)
	sets = append(sets, retiring)
	for _, s := range others {
		if s.UID != retiring.UID {
			sets = append(sets, s)
		}
	}
	return newDecider(sets, []int{0}, opts).decide(0)
}

// finalizations decides the finalization of each retiring set in turn, as
// one Step retires them: a set decided earlier counts as being deleted for
// the later ones, so nothing is kept for a set that is already going.
// family holds every set of the family, the retiring ones included. One
// index over the family serves every decision, so the cost is linear in the
// resources listed, not in their product with the number of sets.
func finalizations(retiring []Set, family []Set, opts PruneOptions) []Decision {
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
	pos       []int     // pos[i]: bit position of sets[i]
	byPos     []int     // byPos[p]: index in sets of bit position p
	words     int       // uint64 words per resource
	retiring  []bool    // retiring[i]: sets[i] is decided
	lists     [][]Ref   // lists[i]: what finalizing sets[i] decides on (see finalized); retiring sets only
	slots     [][]int32 // slots[i][n]: slot of lists[i][n], -1 for a repeat; retiring sets only
	bits      []uint64  // words per slot: which sets list its resource
	index     refIndex  // resource to slot
	reasons   []string  // per bit position, made on first use
	protected map[schema.GroupKind]bool
}

// newDecider indexes sets for the decisions of sets[retiring[k]]. It makes
// one slot per distinct resource of the retiring sets, then one lookup per
// resource the other sets list.
func newDecider(sets []Set, retiring []int, opts PruneOptions) *decider {
	d := &decider{sets: sets, words: (len(sets) + 63) / 64, slots: make([][]int32, len(sets)), lists: make([][]Ref, len(sets))}
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
	isRetiring := make([]bool, len(sets))
	d.retiring = isRetiring
	n := 0
	for _, i := range retiring {
		if !isRetiring[i] {
			isRetiring[i] = true
			d.lists[i] = finalized(&sets[i])
			n += len(d.lists[i])
		}
	}
	// Every size is known up front: one allocation each, none per
	// resource. A retiring set listed twice is indexed once.
	d.index = newRefIndex(n)
	d.bits = make([]uint64, n*d.words)
	own := make([]int32, n)
	for i := range sets {
		if !isRetiring[i] {
			continue
		}
		w, b := d.pos[i]/64, uint64(1)<<(d.pos[i]%64)
		list := d.lists[i]
		d.slots[i], own = own[:len(list):len(list)], own[len(list):]
		d.index.addAll(list, d.slots[i])
		for j, k := range d.slots[i] {
			if d.bits[int(k)*d.words+w]&b != 0 {
				d.slots[i][j] = -1 // listed twice by this set: decided once
				continue
			}
			d.bits[int(k)*d.words+w] |= b
		}
	}
	for i, s := range sets {
		if isRetiring[i] {
			continue
		}
		w, b := d.pos[i]/64, uint64(1)<<(d.pos[i]%64)
		var ks [probeBatch]int32
		for rs := finalized(&s); len(rs) > 0; {
			m := min(len(rs), probeBatch)
			d.index.findAll(rs[:m], ks[:m])
			for _, k := range ks[:m] {
				if k >= 0 {
					d.bits[int(k)*d.words+w] |= b
				}
			}
			rs = rs[m:]
		}
	}
	return d
}

// finalized returns what finalizing s decides on, and what s keeps from
// the finalization of others: what it lists, then what an update in place
// dropped from it that is still to be pruned ([Set.Dropped]). A set
// retired before its prune leaves nothing behind, and one that stays
// prunes what it dropped itself, once it is Ready.
func finalized(s *Set) []Ref {
	if len(s.Dropped) == 0 {
		return s.Resources
	}
	return append(slices.Clip(s.Resources), s.Dropped...)
}

// slotOf returns the slot of a resource sets[i] lists, sets[i] being one
// of the retiring sets.
func (d *decider) slotOf(i int, r Ref) (int32, bool) {
	if !d.retiring[i] {
		return 0, false
	}
	k := d.index.find(&r)
	if k < 0 || d.bits[int(k)*d.words+d.pos[i]/64]&(1<<(d.pos[i]%64)) == 0 {
		return 0, false
	}
	return k, true
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

// successor returns the index in sets of the most preferred set that lists
// the resource in slot k and is not excluded, or -1.
func (d *decider) successor(k int32, ex []uint64) int {
	row := d.bits[int(k)*d.words : int(k+1)*d.words]
	for w, word := range row {
		if word &^= ex[w]; word != 0 {
			return d.byPos[w*64+bits.TrailingZeros64(word)]
		}
	}
	return -1
}

// decide makes the decision of sets[i], one of the retiring sets.
func (d *decider) decide(i int) Decision {
	s := &d.sets[i]
	ex := d.excluded(i)
	list := d.lists[i]
	out := Decision{Set: s.Name, UID: s.UID, Items: make([]Item, 0, len(list))}
	for n, k := range d.slots[i] {
		if k < 0 {
			continue
		}
		out.Items = out.Items[:len(out.Items)+1] // zeroed by make: no Item to build and copy
		it := &out.Items[len(out.Items)-1]
		it.Ref = list[n]
		switch succ := d.successor(k, ex); {
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
	}
	return out
}

// liveVerdict checks a Delete item against the live object before anything
// is deleted, and returns Delete only if that is safe: the object carries no
// keep annotation and either the retiring set is its only owner
// ([ownedBySet]), or it has no owner and its kind is one a set controller
// installs without one. family is the other sets of the family; live nil
// means the object is gone, which needs nothing. Other verdicts pass through.
func liveVerdict(it Item, live *unstructured.Unstructured, retiring Set, family []Set, opts PruneOptions) (Verdict, string) {
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
	case ownedBySet:
		return Delete, "owned by " + retiring.Name + " alone, listed by no other set"
	case notOwned:
		if opts.AnyUnowned || slices.Contains(opts.Unowned, it.Ref.GroupKind()) {
			return Delete, "installed without an owner, listed by no other set"
		}
		return Skip, "has no owner and its kind is not installed without one"
	case ownedByFamily:
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
