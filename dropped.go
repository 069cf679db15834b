package handoff

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// This file holds the record of what an update in place drops from a set
// ([Set.Dropped]): where the executor keeps it, and how it stays within
// what the API server stores.

// DroppedRolePrefix starts the role of a set that records what an update
// in place dropped ([Family.DroppedSets]): "dropped-" and a hash of what it
// lists. No desired role may start with it.
const DroppedRolePrefix = "dropped-"

// isRecord reports whether a set of generation and role records what an
// update in place of generation gen dropped ([Family.DroppedSets]).
func isRecord(generation, role, gen string) bool {
	return generation == gen && strings.HasPrefix(role, DroppedRolePrefix)
}

// ErrDroppedUnrecorded means an update in place took more resources out
// of a set than [DroppedAnnotation] can hold: the update was made, the
// record holds what fits, and the resources left out of it are not pruned
// (they linger, as they would have without the library). It is returned
// as an [*UnrecordedError] in a [*SetError] naming the set.
var ErrDroppedUnrecorded = errors.New("resources dropped by an update in place are not recorded")

// UnrecordedError lists the resources an update in place dropped from a
// set that [DroppedAnnotation] could not hold: they will not be pruned.
// It wraps [ErrDroppedUnrecorded].
type UnrecordedError struct {
	// Dropped is how many resources the update dropped (or still had to
	// prune), those recorded included.
	Dropped int
	// Left are the resources left out of the record.
	Left []Ref
}

func (e *UnrecordedError) Error() string {
	names := make([]string, 0, min(len(e.Left), 5))
	for _, ref := range e.Left[:min(len(e.Left), 5)] {
		names = append(names, ref.String())
	}
	more := ""
	if len(e.Left) > len(names) {
		more = fmt.Sprintf(" and %d more", len(e.Left)-len(names))
	}
	return fmt.Sprintf("%v: %d of the %d resources it dropped do not fit in annotation %s and will not be pruned: %s%s",
		ErrDroppedUnrecorded, len(e.Left), e.Dropped, DroppedAnnotation, strings.Join(names, ", "), more)
}

// Unwrap returns [ErrDroppedUnrecorded].
func (e *UnrecordedError) Unwrap() error { return ErrDroppedUnrecorded }

// The bounds of [DroppedAnnotation]. The API server refuses an object
// whose annotations, keys and values together, take more than 256 KiB
// (apimachinery's TotalAnnotationSizeLimitB), and etcd one larger than
// its request limit (1.5 MiB by default). The record leaves room in both
// for the writes of others (a set controller that annotates the set).
const (
	// maxDroppedBytes bounds the record's value.
	maxDroppedBytes = 128 * 1024
	// annotationRoom bounds the set's annotations, the record's included.
	annotationRoom = apivalidation.TotalAnnotationSizeLimitB * 3 / 4
	// objectRoom bounds the set, as JSON, the record included.
	objectRoom = 1536*1024 - 128*1024
)

// updated returns live with the content, labels and annotations of want,
// the set as built: what an update in place writes, but the record of
// what it drops.
func updated(live, want *unstructured.Unstructured) *unstructured.Unstructured {
	next := live.DeepCopy()
	setContent(next, want)
	lbls, ann := next.GetLabels(), next.GetAnnotations()
	if lbls == nil {
		lbls = map[string]string{}
	}
	if ann == nil {
		ann = map[string]string{}
	}
	maps.Copy(lbls, want.GetLabels())
	maps.Copy(ann, want.GetAnnotations())
	next.SetLabels(lbls)
	next.SetAnnotations(ann)
	// The owners the built set names are added (by UID); those the live
	// set has beside them stay.
	owners := next.GetOwnerReferences()
	for _, o := range want.GetOwnerReferences() {
		if !slices.ContainsFunc(owners, func(l metav1.OwnerReference) bool { return l.UID == o.UID }) {
			owners = append(owners, o)
		}
	}
	if len(owners) > 0 {
		next.SetOwnerReferences(owners)
	}
	return next
}

// dropped returns what live lists and next does not, once each, in the
// order live lists them; with pending, what live's [DroppedAnnotation]
// still has to prune too.
func (r *run) dropped(live, next *unstructured.Unstructured, pending bool) ([]Ref, error) {
	before, err := r.family.resources(live)
	if err != nil {
		return nil, fmt.Errorf("read what the set lists before the update: %w", err)
	}
	if v := live.GetAnnotations()[DroppedAnnotation]; pending && v != "" {
		var refs []Ref
		if err := json.Unmarshal([]byte(v), &refs); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", DroppedAnnotation, err)
		}
		before = append(before, refs...)
	}
	after, err := r.family.resources(next)
	if err != nil {
		return nil, fmt.Errorf("read what the set lists after the update: %w", err)
	}
	kept := make(map[Ref]bool, len(after))
	for _, ref := range after {
		kept[ref] = true
	}
	var out []Ref
	for _, ref := range before {
		if !kept[ref] {
			kept[ref] = true // once each
			out = append(out, ref)
		}
	}
	return out, nil
}

// recordDropped writes on next, the update of live, the resources live
// lists (or still had to prune) that next no longer lists, as
// [DroppedAnnotation]: pruned once the set is Ready for next. The record
// takes at most 128 KiB, and no more than keeps the set's annotations
// within 192 KiB and the set within 1.4 MiB; it returns the dropped
// resources it holds and those left out of it.
func (r *run) recordDropped(live, next *unstructured.Unstructured) (held, left []Ref, err error) {
	dropped, err := r.dropped(live, next, true)
	if err != nil {
		return nil, nil, err
	}
	ann := next.GetAnnotations()
	delete(ann, DroppedAnnotation)
	next.SetAnnotations(ann)
	if len(dropped) == 0 {
		return nil, nil, nil
	}
	budget, err := droppedBudget(next)
	if err != nil {
		return nil, nil, err
	}
	n, v, err := fitRefs(dropped, budget)
	if err != nil {
		return nil, nil, err
	}
	if n > 0 {
		ann[DroppedAnnotation] = v
		next.SetAnnotations(ann)
	}
	return dropped[:n], dropped[n:], nil
}

// droppedBudget is the most [DroppedAnnotation]'s value may take on next,
// which does not carry it.
func droppedBudget(next *unstructured.Unstructured) (int, error) {
	others := 0
	for k, v := range next.GetAnnotations() {
		others += len(k) + len(v)
	}
	obj, err := json.Marshal(next.Object)
	if err != nil {
		return 0, err
	}
	key := len(DroppedAnnotation)
	// The annotation in the object's JSON: "key":"value", and the value's
	// quotes escaped.
	inObject := key + 6
	budget := min(maxDroppedBytes, annotationRoom-others-key, objectRoom-len(obj)-inObject)
	return max(budget, 0), nil
}

// fitRefs returns how many of refs, from the first, the record holds in
// at most budget bytes, and the record of them.
func fitRefs(refs []Ref, budget int) (int, string, error) {
	size, n := 2, 0 // the brackets
	for _, ref := range refs {
		b, err := json.Marshal(ref)
		if err != nil {
			return 0, "", err
		}
		grow := len(b)
		if n > 0 {
			grow++ // the comma
		}
		if size+grow > budget {
			break
		}
		size += grow
		n++
	}
	if n == 0 {
		return 0, "", nil
	}
	v, err := json.Marshal(refs[:n])
	return n, string(v), err
}

// unrecordedError reports the resources an update of set dropped and its
// record left out.
func unrecordedError(set string, held, left []Ref) error {
	return &SetError{Name: set, Err: fmt.Errorf("update in place: %w", &UnrecordedError{Dropped: len(held) + len(left), Left: left})}
}

// recordDroppedSets records what the update of live to next drops in sets
// of the family of their own ([Family.DroppedSets]), created before the
// update: each of the set's generation, role [DroppedRolePrefix] and a
// hash, superseded by that generation, so that the planner retires it
// (deleting what no live set lists) once the generation is Ready. A
// record live's [DroppedAnnotation] holds from an earlier version is left
// to [ActionPrune].
func (r *run) recordDroppedSets(ctx context.Context, gen string, live, next *unstructured.Unstructured) error {
	dropped, err := r.dropped(live, next, false)
	if err != nil || len(dropped) == 0 {
		return err
	}
	objs, err := r.family.DroppedSets(live, dropped)
	if err != nil {
		return fmt.Errorf("record what it drops: %w", err)
	}
	want := make(map[Ref]bool, len(dropped))
	for _, ref := range dropped {
		want[ref] = true
	}
	lists := make([][]Ref, len(objs))
	seen := make(map[Ref]bool, len(dropped))
	for i, obj := range objs {
		refs, err := r.family.resources(obj)
		if err != nil {
			return fmt.Errorf("%w: DroppedSets made a set whose resources cannot be read: %w", ErrInvalidFamily, err)
		}
		for _, ref := range refs {
			if !want[ref] {
				return fmt.Errorf("%w: DroppedSets made a set that lists %s, which the update does not drop", ErrInvalidFamily, ref)
			}
			seen[ref] = true
		}
		lists[i] = refs
	}
	if len(seen) != len(want) {
		return fmt.Errorf("%w: DroppedSets recorded %d of the %d resources the update drops", ErrInvalidFamily, len(seen), len(want))
	}
	for i, obj := range objs {
		if err := r.createRecord(ctx, gen, live.GetName(), obj, lists[i]); err != nil {
			return err
		}
	}
	return nil
}

// createRecord creates obj, a set of generation gen that records refs,
// what an update of set of drops. Its name derives from of and refs, so a
// create retried after a lost response finds it, and takes it as it is
// when it is that record; a name held by another object (a record being
// finalized) makes it try the next.
func (r *run) createRecord(ctx context.Context, gen, of string, obj *unstructured.Unstructured, refs []Ref) error {
	const tries = 8
	var name string
	for salt, gone := 0, 0; salt < tries && gone < tries; salt++ {
		role := DroppedRolePrefix + recordHash(of, refs, salt)
		name = r.family.SetName(gen, role)
		rec := obj.DeepCopy()
		r.family.typeMeta(rec)
		rec.SetName(name)
		rec.SetGenerateName("")
		if err := r.family.label(rec, gen, role); err != nil {
			return &SetError{Name: name, Err: err}
		}
		ann := rec.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[r.family.supersededAnnotation()] = gen
		rec.SetAnnotations(ann)
		r.record(Call{Verb: "create", Resource: r.family.Resource.Resource, Name: name})
		if r.e.DryRun {
			return nil
		}
		made, err := r.e.sets().Create(ctx, rec, metav1.CreateOptions{})
		switch {
		case err == nil:
			r.saw(made)
			return nil
		case !apierrors.IsAlreadyExists(err):
			return &SetError{Name: name, Err: fmt.Errorf("create the record of what %s drops: %w", of, err)}
		}
		r.setReads.gets++
		held, err := r.e.sets().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			salt, gone = salt-1, gone+1 // gone meanwhile: create it again
			continue
		}
		if err != nil {
			return &SetError{Name: name, Err: fmt.Errorf("get after AlreadyExists: %w", err)}
		}
		if s, err := r.family.Observe(held); err == nil && !s.Deleting && s.Generation == gen && s.Role == role && sameRefs(s.Resources, refs) {
			r.saw(held)
			return nil
		}
	}
	return &SetError{Name: name, Err: fmt.Errorf("%w: %d names for the record of what %s drops are held by other objects", ErrNameTaken, tries, of)}
}

// recordHash is the hash in the role of a record: of the set it records
// for, what it lists and salt.
func recordHash(of string, refs []Ref, salt int) string {
	h := sha256.New()
	h.Write([]byte(of))
	for _, ref := range refs {
		h.Write([]byte{0})
		h.Write([]byte(ref.String()))
	}
	if salt > 0 {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(salt)))
	}
	return hex.EncodeToString(h.Sum(nil)[:5])
}

// sameRefs reports whether a and b hold the same references.
func sameRefs(a, b []Ref) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[Ref]bool, len(a))
	for _, ref := range a {
		in[ref] = true
	}
	for _, ref := range b {
		if !in[ref] {
			return false
		}
	}
	return true
}
