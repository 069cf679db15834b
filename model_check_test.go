package handoff_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds the model's checks. They read nothing the library
// computes: a set is read here from its labels, name, annotations, status
// and spec.manifests by the rules of the contract, and every invariant is
// judged on the cluster's recorded writes, replayed one by one, so each
// state an API call (or a garbage-collector pass) left is checked.

// mSet is the model's reading of a set object.
type mSet struct {
	key        handofftest.Key
	uid        types.UID
	fam        string // famPipelines, famTriggers or ""
	inFamily   bool   // of the pipelines family, the one the executors drive
	gen, role  string
	badEntry   bool // a spec.manifests entry without kind or name
	deleting   bool
	ready      bool // Ready=True for its metadata.generation
	superseded bool // carries the superseded mark
	hash       string
	refs       []handofftest.Key
	// dropped are the resources an update in place took out of the set
	// and its executor still has to prune (handoff.DroppedAnnotation).
	dropped []handofftest.Key
}

// droppedBy reports whether the set records k as dropped and not pruned.
func (s mSet) droppedBy(k handofftest.Key) bool { return slices.Contains(s.dropped, k) }

func (s mSet) readable() bool { return s.inFamily && s.gen != "" && s.role != "" && !s.badEntry }

func (s mSet) String() string {
	role := s.role
	if role == "" {
		role = "?"
	}
	st := ""
	switch {
	case s.deleting:
		st = ", deleting"
	case s.superseded:
		st = ", superseded"
	case s.ready:
		st = ", Ready"
	}
	return fmt.Sprintf("%s (%s/%s%s)", s.key.Name, s.gen, role, st)
}

func (s mSet) lists(k handofftest.Key) bool { return slices.Contains(s.refs, k) }

// readyFor reports whether the set is Ready for the current spec of role r
// of desired d: not deleting, not superseded, Ready for its metadata
// generation, with the role's hash.
func (s mSet) readyFor(d modelDesired, r string) bool {
	return s.readable() && !s.deleting && !s.superseded && s.ready &&
		s.gen == genName(d.Gen) && s.role == r && s.hash == roleHash(d.Gen, r, d.H)
}

// old reports whether the set is of neither the desired generation nor one
// of its roles (a duplicate of a desired role is not old).
func (s mSet) old(d modelDesired) bool {
	return s.gen != genName(d.Gen) || !slices.Contains(d.roles(), s.role)
}

func isSetKey(k handofftest.Key) bool { return k.Group == mSetGroup && k.Kind == mSetKind }

// The families the model knows: the component the executors drive, and
// the second one (modelConfig.Second).
const (
	famPipelines = "TektonPipeline"
	famTriggers  = "TektonTrigger"
)

// deriveSet reads a set object as the model understands the contract.
func deriveSet(u *unstructured.Unstructured) mSet {
	s := mSet{key: handofftest.KeyOf(u), uid: u.GetUID()}
	lbls := u.GetLabels()
	if c := lbls[mCreatedBy]; isSetKey(s.key) && lbls[mType] == "main" && (c == famPipelines || c == famTriggers) {
		s.fam = c
	}
	s.inFamily = s.fam == famPipelines
	s.gen = lbls[mGeneration]
	s.role = lbls[handoff.DefaultRoleLabel]
	if s.role == "" {
		s.role, _ = legacyRole(u)
	}
	ann := u.GetAnnotations()
	s.hash = ann[mHash]
	var dropped []struct{ Group, Kind, Namespace, Name string }
	if v := ann[handoff.DroppedAnnotation]; v != "" && json.Unmarshal([]byte(v), &dropped) == nil {
		for _, d := range dropped {
			s.dropped = append(s.dropped, handofftest.Key{Group: d.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name})
		}
	}
	s.superseded = ann[handoff.DefaultSupersededAnnotation] != ""
	s.deleting = u.GetDeletionTimestamp() != nil
	if st, ok := u.Object["status"].(map[string]any); ok {
		og, ok := st["observedGeneration"].(int64)
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			if c, _ := c.(map[string]any); c["type"] == "Ready" && c["status"] == "True" && ok && og == u.GetGeneration() {
				s.ready = true
			}
		}
	}
	items, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "manifests")
	list, _ := items.([]any)
	for _, it := range list {
		m, _ := it.(map[string]any)
		e := &unstructured.Unstructured{Object: m}
		if m == nil || e.GetKind() == "" || e.GetName() == "" {
			s.badEntry = true
			continue
		}
		gv, _ := schema.ParseGroupVersion(e.GetAPIVersion())
		k := handofftest.Key{Group: gv.Group, Kind: e.GetKind(), Namespace: e.GetNamespace(), Name: e.GetName()}
		if mk, ok := mKindOf(schema.GroupKind{Group: k.Group, Kind: k.Kind}); ok && !mk.namespaced {
			k.Namespace = ""
		} else if k.Namespace == "" {
			k.Namespace = ann[mTargetNS]
		}
		s.refs = append(s.refs, k)
	}
	return s
}

// violation is one broken invariant.
type violation struct {
	// Inv names the invariant: I1, keep, I2, I3, I4, I5 or writes.
	Inv string
	// Op is the operation during which it broke: 0 for the setup, 1 … n
	// for the walk's operations, n+1 for the final convergence.
	Op  int
	At  time.Time
	Msg string
}

func (v violation) String() string {
	return fmt.Sprintf("%s at %s (op %d): %s", v.Inv, v.At.Format(time.TimeOnly), v.Op, v.Msg)
}

// span is the stretch of the cluster's clock one operation took.
type span struct {
	from, to time.Time
	desired  *modelDesired
	// structural: the operation changed the desired generation or the
	// family's sets from outside.
	structural bool
}

// checker replays the cluster's writes over its own copy of the state.
type checker struct {
	spans   []span
	objs    map[handofftest.Key]*unstructured.Unstructured
	sets    map[handofftest.Key]mSet // the family's sets, as read now
	listed  map[handofftest.Key]bool // listed by a family set at some time
	existed map[handofftest.Key]bool
	kept    map[handofftest.Key]bool // carried the keep annotation at some time
	decoys  map[handofftest.Key]bool
	// goneAt and fgAt say when an object (by UID) was removed, or began
	// deleting in Foreground; since says when each set began to list each
	// resource. A resource the garbage collector deletes was garbage from
	// the moment its last owner went.
	goneAt map[types.UID]time.Time
	fgAt   map[types.UID]time.Time
	since  map[handofftest.Key]map[handofftest.Key]time.Time
	// The second family's sets, as read now, when each began to list
	// each resource, and what they ever listed; the family of every set
	// UID seen.
	others      map[handofftest.Key]mSet
	otherSince  map[handofftest.Key]map[handofftest.Key]time.Time
	otherListed map[handofftest.Key]bool
	famOf       map[types.UID]string
	// adminGone: removed by the admin (a CRD uninstalled with its
	// objects) and not created since; unserved: the kinds the cluster does
	// not serve at the end.
	adminGone map[handofftest.Key]bool
	unserved  map[schema.GroupKind]bool
	// rbacGone: the first RBAC object each executor deleted in this
	// operation (one Step each).
	rbacGone map[string]handofftest.Key
	// unrecorded: what an executor reported it could not record as
	// dropped by an update in place (handoff.UnrecordedError), so may
	// linger.
	unrecorded map[handofftest.Key]bool
	vs         []violation
	span       int
	writes     int
	window     *writeWindow
	prev       convergence
	// upgrades counts the write-count windows closed, maxWrites the most
	// writes to one shared resource in any of them.
	upgrades, maxWrites int
	// maxDropped is the largest record of what an update in place dropped
	// (handoff.DroppedAnnotation) written, in bytes.
	maxDropped int
}

// convergence is the family's state at the end of an operation.
type convergence struct {
	ok      bool
	desired *modelDesired
	refs    map[handofftest.Key]bool
}

// writeWindow counts writes per resource over one upgrade: from a desired
// change made while the family had converged, until it converges again.
type writeWindow struct {
	start    int
	from, to modelDesired
	fromRefs map[handofftest.Key]bool
	writes   map[handofftest.Key][]handofftest.Write
}

func newChecker(spans []span, decoys []handofftest.Key) *checker {
	ch := &checker{
		spans: spans, objs: map[handofftest.Key]*unstructured.Unstructured{}, sets: map[handofftest.Key]mSet{},
		listed: map[handofftest.Key]bool{}, existed: map[handofftest.Key]bool{}, kept: map[handofftest.Key]bool{},
		decoys: map[handofftest.Key]bool{}, goneAt: map[types.UID]time.Time{}, fgAt: map[types.UID]time.Time{},
		since:  map[handofftest.Key]map[handofftest.Key]time.Time{},
		others: map[handofftest.Key]mSet{}, otherSince: map[handofftest.Key]map[handofftest.Key]time.Time{},
		otherListed: map[handofftest.Key]bool{}, famOf: map[types.UID]string{}, adminGone: map[handofftest.Key]bool{},
		rbacGone: map[string]handofftest.Key{},
	}
	for _, k := range decoys {
		ch.decoys[k] = true
	}
	return ch
}

func (ch *checker) fail(inv string, at time.Time, format string, a ...any) {
	ch.vs = append(ch.vs, violation{Inv: inv, Op: ch.span, At: at, Msg: fmt.Sprintf(format, a...)})
}

// replay checks every write in order, then the end state.
func (ch *checker) replay(writes []handofftest.Write) {
	for _, w := range writes {
		for ch.span < len(ch.spans)-1 && w.Time.After(ch.spans[ch.span].to) {
			ch.endSpan()
			ch.span++
		}
		ch.write(w)
	}
	for ch.span < len(ch.spans)-1 {
		ch.endSpan()
		ch.span++
	}
	ch.endSpan()
	ch.final()
}

func isExecutor(actor string) bool { return strings.HasPrefix(actor, "executor-") }

// write checks one write against the state before it, then applies it.
func (ch *checker) write(w handofftest.Write) {
	ch.writes++
	sp := ch.spans[ch.span]
	key := w.Key
	before := ch.objs[key]
	gone := w.Effect == handofftest.Deleting || (w.Effect == handofftest.Removed && (before == nil || before.GetDeletionTimestamp() == nil))
	switch {
	case gone && isSetKey(key) && before != nil:
		ch.retired(w, deriveSet(before), sp.desired)
	case gone:
		ch.deleted(w, before)
	case w.Effect == handofftest.Created && isSetKey(key) && isExecutor(w.Actor):
		ch.created(w, deriveSet(w.Object))
	}
	ch.contained(w, before)
	if ch.window != nil {
		if _, ok := ch.window.fromRefs[key]; ok && (w.Effect == handofftest.Created || w.Effect == handofftest.Updated) &&
			w.Actor != handofftest.GCActor && w.Actor != handofftest.SeedActor && w.Actor != "legacy" {
			ch.window.writes[key] = append(ch.window.writes[key], w)
		}
	}
	if w.Effect == handofftest.Removed {
		ch.goneAt[w.UID] = w.Time
		delete(ch.objs, key)
		delete(ch.sets, key)
		delete(ch.since, key)
		delete(ch.others, key)
		delete(ch.otherSince, key)
		return
	}
	if w.Effect == handofftest.Created {
		delete(ch.adminGone, key)
	}
	if _, ok := ch.fgAt[w.UID]; !ok && w.Object.GetDeletionTimestamp() != nil && slices.Contains(w.Object.GetFinalizers(), handofftest.FinalizerForeground) {
		ch.fgAt[w.UID] = w.Time
	}
	ch.objs[key] = w.Object
	ch.existed[key] = true
	if w.Object.GetAnnotations()[mKeep] == handoff.KeepValue {
		ch.kept[key] = true
	}
	if isSetKey(key) {
		s := deriveSet(w.Object)
		ch.famOf[s.uid] = s.fam
		ch.maxDropped = max(ch.maxDropped, len(w.Object.GetAnnotations()[handoff.DroppedAnnotation]))
		sets, since, listed := ch.sets, ch.since, ch.listed
		switch s.fam {
		case famPipelines:
		case famTriggers:
			sets, since, listed = ch.others, ch.otherSince, ch.otherListed
		default:
			return
		}
		sets[key] = s
		old := since[key]
		next := make(map[handofftest.Key]time.Time, len(s.refs))
		for _, r := range s.refs {
			listed[r] = true
			next[r] = w.Time
			if t, ok := old[r]; ok {
				next[r] = t
			}
		}
		since[key] = next
	}
}

// deleted checks I1 and keep: an object a live set of the family lists is
// never deleted, nor is a protected or keep-annotated one. A set that came
// to list an object only once it was garbage (its owners gone) could not
// have kept it from the garbage collector.
func (ch *checker) deleted(w handofftest.Write, before *unstructured.Unstructured) {
	if w.Actor == actorAdmin {
		// A CRD uninstalled, and its objects with it, as the API server
		// does: the cluster's doing, none of the library's.
		ch.adminGone[w.Key] = true
		return
	}
	garbage := w.Time
	if w.Actor == handofftest.GCActor && before != nil {
		garbage = ch.garbageSince(before, w.Time)
	}
	ch.acrossFamilies(w, before, garbage)
	for _, s := range ch.sortedSets() {
		if !s.deleting && s.lists(w.Key) && !ch.since[s.key][w.Key].After(garbage) {
			ch.fail("I1", w.Time, "%s %s %s (%s) while live set %s lists it", w.Actor, w.Verb, w.Key, w.Effect, s)
			break
		}
	}
	// What an update in place dropped goes only once the set that
	// dropped it is Ready for the spec that dropped it: until then its
	// old spec may still need it.
	if w.Actor != handofftest.GCActor {
		for _, s := range ch.sortedSets() {
			if !s.deleting && s.droppedBy(w.Key) && !s.ready {
				ch.fail("I5", w.Time, "%s %s %s (%s), which set %s dropped, before that set is Ready for the spec that dropped it", w.Actor, w.Verb, w.Key, w.Effect, s)
				break
			}
		}
	}
	// RBAC last: a Step deletes no other object after an RBAC one, whose
	// rights the operator may need to delete it.
	if isExecutor(w.Actor) && w.Verb == "delete" {
		first, ok := ch.rbacGone[w.Actor]
		switch {
		case w.Key.Group == kClusterRole.gvr.Group && !ok:
			ch.rbacGone[w.Actor] = w.Key
		case w.Key.Group != kClusterRole.gvr.Group && ok:
			ch.fail("order", w.Time, "%s %s %s (%s) after it deleted %s in the same Step", w.Actor, w.Verb, w.Key, w.Effect, first)
		}
	}
	gk := schema.GroupKind{Group: w.Key.Group, Kind: w.Key.Kind}
	switch {
	case mProtected[gk]:
		ch.fail("keep", w.Time, "%s %s protected %s (%s)", w.Actor, w.Verb, w.Key, w.Effect)
	case before != nil && before.GetAnnotations()[mKeep] == handoff.KeepValue:
		ch.fail("keep", w.Time, "%s %s keep-annotated %s (%s)", w.Actor, w.Verb, w.Key, w.Effect)
	}
}

// acrossFamilies checks I4 between families: nothing a family's actors
// do (its executors, its set controller and finalizer, or the garbage
// collector taking what its sets owned) deletes an object that a live set
// of another family lists, listed since before the object became garbage.
func (ch *checker) acrossFamilies(w handofftest.Write, before *unstructured.Unstructured, garbage time.Time) {
	var fam string
	switch {
	case isExecutor(w.Actor), w.Actor == "controller":
		fam = famPipelines
	case w.Actor == actorSecondCtrl, w.Actor == actorSecondOp:
		fam = famTriggers
	case w.Actor == handofftest.GCActor && before != nil:
		fam = ch.famOf[ch.lastOwner(before)]
	}
	others := ch.others
	switch fam {
	case famPipelines:
	case famTriggers:
		others = ch.sets
	default:
		return
	}
	since := ch.otherSince
	if fam == famTriggers {
		since = ch.since
	}
	for _, s := range others {
		if !s.deleting && s.lists(w.Key) && !since[s.key][w.Key].After(garbage) {
			ch.fail("I4-families", w.Time, "%s (%s family) %s %s (%s) while live set %s of the %s family lists it",
				w.Actor, fam, w.Verb, w.Key, w.Effect, s, s.fam)
			return
		}
	}
}

// lastOwner returns the UID of the owner of obj that went away last.
func (ch *checker) lastOwner(obj *unstructured.Unstructured) types.UID {
	var last time.Time
	var uid types.UID
	for _, o := range obj.GetOwnerReferences() {
		t, ok := ch.goneAt[o.UID]
		if f, fok := ch.fgAt[o.UID]; fok && (!ok || f.Before(t)) {
			t, ok = f, true
		}
		if ok && !t.Before(last) {
			last, uid = t, o.UID
		}
	}
	return uid
}

// garbageSince returns when the last owner of obj went away (was removed,
// or began deleting in Foreground), or now if one has not.
func (ch *checker) garbageSince(obj *unstructured.Unstructured, now time.Time) time.Time {
	var last time.Time
	for _, o := range obj.GetOwnerReferences() {
		t, ok := ch.goneAt[o.UID]
		if f, fok := ch.fgAt[o.UID]; fok && (!ok || f.Before(t)) {
			t, ok = f, true
		}
		if !ok {
			return now
		}
		if t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		return now
	}
	return last
}

// retired checks a set going away: I5 for an executor's retirement of an
// old set, and that no executor ever retires a set it cannot read.
func (ch *checker) retired(w handofftest.Write, s mSet, d *modelDesired) {
	if !s.inFamily || !isExecutor(w.Actor) || w.Verb != "delete" {
		return
	}
	if !s.readable() {
		ch.fail("I4", w.Time, "%s retired unreadable set %s", w.Actor, s)
		return
	}
	if d == nil || !s.old(*d) {
		return
	}
	for _, r := range d.roles() {
		ok := false
		for _, o := range ch.sets {
			ok = ok || o.readyFor(*d, r)
		}
		if !ok {
			ch.fail("I5", w.Time, "%s retired %s while role %s of desired %s had no set Ready for its current spec; family: %s",
				w.Actor, s, r, d, ch.familyString())
			return
		}
	}
}

// created checks I2: an executor never creates a second set of a
// (generation, role).
func (ch *checker) created(w handofftest.Write, s mSet) {
	for _, o := range ch.sortedSets() {
		if o.readable() && o.gen == s.gen && o.role == s.role {
			ch.fail("I2", w.Time, "%s created %s while %s exists", w.Actor, s, o)
			return
		}
	}
}

// contained checks I4: the library and the controller write only the
// family's sets and what they list; the executor changes only owners; the
// garbage collector never touches the decoys.
func (ch *checker) contained(w handofftest.Write, before *unstructured.Unstructured) {
	switch w.Actor {
	case handofftest.SeedActor, "legacy", actorAdmin, actorSecondOp:
		return
	case handofftest.GCActor:
		if ch.decoys[w.Key] {
			ch.fail("I4", w.Time, "garbage collector %s decoy %s (%s)", w.Verb, w.Key, w.Effect)
		}
		return
	case actorSecondCtrl:
		// The second family's controller writes its own sets and what
		// they list.
		switch {
		case isSetKey(w.Key) && deriveSet(w.Object).fam != famTriggers:
			ch.fail("I4", w.Time, "%s %s set %s outside its family (%s)", w.Actor, w.Verb, w.Key, w.Effect)
		case !isSetKey(w.Key) && (ch.decoys[w.Key] || !ch.otherListed[w.Key]):
			ch.fail("I4", w.Time, "%s %s %s, which no set of its family lists (%s)", w.Actor, w.Verb, w.Key, w.Effect)
		}
		return
	}
	if isSetKey(w.Key) {
		if !deriveSet(w.Object).inFamily {
			ch.fail("I4", w.Time, "%s %s set %s outside the family (%s)", w.Actor, w.Verb, w.Key, w.Effect)
		}
		return
	}
	if ch.decoys[w.Key] || !ch.listed[w.Key] {
		ch.fail("I4", w.Time, "%s %s %s, which no set of the family lists (%s)", w.Actor, w.Verb, w.Key, w.Effect)
		return
	}
	if isExecutor(w.Actor) && w.Verb == "delete" && before != nil &&
		slices.Contains(mPrune().Unowned, before.GroupVersionKind().GroupKind()) {
		// The retirement of a set without a finalizer deletes the obsolete
		// objects of the kinds installed without an owner (or owned by that
		// set alone); I1 checks that no live set lists them.
		return
	}
	if isExecutor(w.Actor) && w.Verb == "delete" && ch.droppedByFamily(w.Key) {
		// The prune of what an update in place dropped; I1 and I5 check
		// that no live set lists it and that the set that dropped it is
		// Ready.
		return
	}
	if isExecutor(w.Actor) && (before == nil || w.Effect != handofftest.Updated || !sameButOwners(before, w.Object)) {
		ch.fail("I4", w.Time, "%s %s %s beyond its ownerReferences (%s)", w.Actor, w.Verb, w.Key, w.Effect)
	}
}

// sameButOwners reports whether a and b differ in nothing but what a
// handover or release writes: the ownerReferences and the mark of the set
// released (handoff.ReleasedAnnotation).
func sameButOwners(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		c.SetOwnerReferences(nil)
		c.SetResourceVersion("")
		c.SetManagedFields(nil)
		if ann := c.GetAnnotations(); ann != nil {
			delete(ann, handoff.ReleasedAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			c.SetAnnotations(ann)
		}
		return c.Object
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// mapKeys returns m's keys in no order (slices.Collect(maps.Keys(m)) needs
// Go 1.23; the module's minimum is 1.22).
func mapKeys[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func (ch *checker) sortedSets() []mSet {
	keys := mapKeys(ch.sets)
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name < keys[j].Name })
	out := make([]mSet, len(keys))
	for i, k := range keys {
		out[i] = ch.sets[k]
	}
	return out
}

func (ch *checker) familyString() string {
	var parts []string
	for _, s := range ch.sortedSets() {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, ", ")
}

// converged reports whether the family's readable sets are exactly one
// per role of d, each Ready for its current spec with nothing left to
// prune (none at all for d nil), and returns what they list.
func (ch *checker) converged(d *modelDesired) (bool, map[handofftest.Key]bool) {
	refs := map[handofftest.Key]bool{}
	count := map[string]int{}
	ok := true
	for _, s := range ch.sets {
		if !s.readable() {
			continue
		}
		if d == nil || s.old(*d) || !s.readyFor(*d, s.role) || len(s.dropped) > 0 {
			ok = false
		}
		count[s.role]++
		for _, r := range s.refs {
			refs[r] = true
		}
	}
	if d != nil {
		for _, r := range d.roles() {
			ok = ok && count[r] == 1
		}
	}
	return ok, refs
}

// endSpan closes the checks of one operation: it opens, ends or drops the
// write-count window of an upgrade.
func (ch *checker) endSpan() {
	sp := ch.spans[ch.span]
	clear(ch.rbacGone)
	ok, refs := ch.converged(sp.desired)
	if win := ch.window; win != nil {
		switch {
		case sp.structural:
			ch.window = nil
		case ok:
			ch.closeWindow(refs)
			ch.window = nil
		}
	}
	if sp.structural && ch.prev.ok && ch.prev.desired != nil && sp.desired != nil && *sp.desired != *ch.prev.desired {
		ch.window = &writeWindow{start: ch.span, from: *ch.prev.desired, to: *sp.desired, fromRefs: ch.prev.refs, writes: map[handofftest.Key][]handofftest.Write{}}
	}
	ch.prev = convergence{ok: ok, desired: sp.desired, refs: refs}
}

// closeWindow checks that no resource both generations list was written
// more than twice over the upgrade.
func (ch *checker) closeWindow(refs map[handofftest.Key]bool) {
	win := ch.window
	ch.upgrades++
	for k, ws := range win.writes {
		if refs[k] {
			ch.maxWrites = max(ch.maxWrites, len(ws))
		}
	}
	keys := mapKeys(win.writes)
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		ws := win.writes[k]
		if !refs[k] || len(ws) <= 2 {
			continue
		}
		var lines []string
		for _, w := range ws {
			lines = append(lines, fmt.Sprintf("%s %s by %s", w.Time.Format(time.TimeOnly), w.Verb, w.Actor))
		}
		ch.vs = append(ch.vs, violation{Inv: "writes", Op: ch.span, At: ws[2].Time,
			Msg: fmt.Sprintf("%s written %d times over the upgrade %s → %s (op %d on), want at most 2: %s",
				k, len(ws), win.from, win.to, win.start, strings.Join(lines, "; "))})
	}
}

// final checks I2 and I3 on the end state: only the desired sets, each
// Ready, what they list present, what only older sets listed gone, and
// kept and protected objects present and owned by no retired set.
func (ch *checker) final() {
	sp := ch.spans[len(ch.spans)-1]
	d := sp.desired
	at := sp.to
	type setView struct{ Gen, Role string }
	var want, got []setView
	if d != nil {
		for _, r := range d.roles() {
			want = append(want, setView{genName(d.Gen), r})
		}
	}
	current := map[handofftest.Key]bool{}
	live := map[types.UID]bool{}
	for _, s := range ch.others {
		live[s.uid] = true
		for _, r := range s.refs {
			current[r] = true
		}
	}
	var notReady []string
	for _, s := range ch.sortedSets() {
		live[s.uid] = true
		for _, r := range s.refs {
			current[r] = true
		}
		if !s.readable() {
			continue // never the library's to remove
		}
		got = append(got, setView{s.gen, s.role})
		if d != nil && !s.readyFor(*d, s.role) {
			notReady = append(notReady, s.String())
		}
	}
	less := func(a, b setView) int { return strings.Compare(a.Gen+"/"+a.Role, b.Gen+"/"+b.Role) }
	slices.SortFunc(want, less)
	slices.SortFunc(got, less)
	if diff := cmp.Diff(want, got); diff != "" {
		ch.fail("I3", at, "sets after the final convergence (-want +got):\n%s", diff)
	}
	if len(notReady) > 0 {
		ch.fail("I3", at, "sets not Ready for desired %s after the final convergence: %s", d, strings.Join(notReady, ", "))
	}
	keys := mapKeys(ch.listed)
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		obj, exists := ch.objs[k]
		keep := mProtected[schema.GroupKind{Group: k.Group, Kind: k.Kind}] || ch.kept[k]
		if ch.unserved[schema.GroupKind{Group: k.Group, Kind: k.Kind}] {
			continue // no object of a kind not served can exist
		}
		switch {
		case d != nil && current[k] && !exists && ch.listedByDesired(k):
			ch.fail("I3", at, "%s, listed by a desired set, is missing", k)
		case current[k]:
		case keep && ch.existed[k] && !exists && !ch.adminGone[k]:
			ch.fail("keep", at, "kept %s is gone", k)
		case keep && exists:
			for _, o := range obj.GetOwnerReferences() {
				if !live[o.UID] {
					ch.fail("keep", at, "kept %s still names retired set %s (uid %s)", k, o.Name, o.UID)
				}
			}
		case exists && ch.unrecorded[k]:
			// Reported left out of the record of what an update dropped.
		case exists:
			ch.fail("I3", at, "%s, which only older sets listed, is still there", k)
		}
	}
}

// droppedByFamily reports whether a live set of the family records k as
// dropped by an update in place.
func (ch *checker) droppedByFamily(k handofftest.Key) bool {
	for _, s := range ch.sets {
		if s.inFamily && !s.deleting && s.droppedBy(k) {
			return true
		}
	}
	return false
}

func (ch *checker) listedByDesired(k handofftest.Key) bool {
	for _, s := range ch.sets {
		if s.readable() && s.lists(k) {
			return true
		}
	}
	return false
}
