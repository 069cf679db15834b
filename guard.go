package handoff

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Guard answers, for one set, whether its controller may write a resource
// the set lists, while generations coexist. Without it the old generation's
// controller would write shared resources back to the old release while the
// new one writes them forward, until the old set is gone.
//
// The contract for set controllers: before applying a resource, ask
// [Guard.MayApply]; when it says no, leave the resource alone (it is not
// deleted, only not written). The executor marks old sets with
// [Family.SupersededAnnotation] as the first step of an upgrade and removes
// the mark on a rollback, which gives the resources back. A controller that
// reads the live object before writing it asks [Guard.MayWrite] instead,
// which also holds when its view of the family is older than the cluster,
// and stamps what it writes with [Guard.Stamp].
type Guard struct {
	set     Set
	kind    schema.GroupKind // the set's own kind, from set.Object
	known   map[types.UID]Set
	strange map[types.UID]Set // sets of the kind outside the family
	claims  map[Ref]string
}

// NewGuard builds the guard of set from the sets of its family. It costs one
// pass over the resources of the superseding generation, so a controller
// builds it once per reconcile, not once per resource.
//
// others are the sets of the same kind outside the family that the
// controller knows of (another component's sets): [Guard.MayWrite] then
// refuses an object a live one of them wrote last, as [Executor.Finalize]
// refuses to delete it. Families can share an object (an admission webhook
// two components serve); each family's sets manage it only while no live
// set of another family holds it.
func NewGuard(set Set, family []Set, others ...Set) Guard {
	g := Guard{set: set, known: make(map[types.UID]Set, len(family)), strange: make(map[types.UID]Set, len(others))}
	if set.Object != nil {
		g.kind = set.Object.GroupVersionKind().GroupKind()
	}
	for _, s := range family {
		g.known[s.UID] = s
	}
	for _, s := range others {
		if _, mine := g.known[s.UID]; !mine && s.UID != set.UID {
			g.strange[s.UID] = s
		}
	}
	if set.SupersededBy == "" || set.Deleting {
		return g
	}
	g.claims = make(map[Ref]string)
	for _, s := range family {
		if s.UID == set.UID || s.Deleting || s.Generation != set.SupersededBy {
			continue
		}
		for _, r := range s.Resources {
			if _, ok := g.claims[r]; !ok {
				g.claims[r] = s.Name
			}
		}
	}
	return g
}

// MayApply reports whether the set may write r; when it may not, reason
// names what stops it.
//
// A set being deleted writes nothing. A set that is not superseded writes
// everything it lists. A superseded set writes only what no live set of the
// superseding generation lists: the rest has a newer owner.
func (g Guard) MayApply(r Ref) (ok bool, reason string) {
	if g.set.Deleting {
		return false, fmt.Sprintf("set %s is being deleted", g.set.Name)
	}
	if by, claimed := g.claims[r]; claimed {
		return false, fmt.Sprintf("%s is claimed by %s of generation %s", r, by, g.set.SupersededBy)
	}
	return true, ""
}

// WriterAnnotation is the mark a set controller stamps, with [Guard.Stamp],
// on every object it writes: the UID of the writing set, its creation time
// and the metadata.generation of the set's spec it applied, as
// "<uid>@<RFC 3339 time>#<generation>". [Guard.MayWrite] reads it to tell who
// last wrote an object that has no controller ownerReference (webhook
// configurations, APIServices, CRDs, Namespaces).
const WriterAnnotation = "handoff.kube-handoff.io/written-by"

// Stamp marks obj, about to be written by the guard's set, with
// [WriterAnnotation].
func (g Guard) Stamp(obj *unstructured.Unstructured) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[WriterAnnotation] = fmt.Sprintf("%s@%s#%d", g.set.UID, g.set.Created.UTC().Format(time.RFC3339), g.generation())
	obj.SetAnnotations(ann)
}

// generation is the metadata.generation of the guard's set as its view
// holds it; 0 when unknown.
func (g Guard) generation() int64 {
	if g.set.Object == nil {
		return 0
	}
	return g.set.Object.GetGeneration()
}

// stamp is a parsed [WriterAnnotation] value; created and generation are
// zero when the value does not carry them.
type stamp struct {
	uid        types.UID
	created    time.Time
	generation int64
}

func parseStamp(v string) stamp {
	id, rest, _ := strings.Cut(v, "@")
	at, gen, _ := strings.Cut(rest, "#")
	st := stamp{uid: types.UID(id)}
	st.created, _ = time.Parse(time.RFC3339, at)
	st.generation, _ = strconv.ParseInt(gen, 10, 64)
	return st
}

// ReleasedAnnotation lists, newest first and comma-separated, the UIDs of
// the last sets an object was released from when they retired: the
// executor and [Executor.Finalize] write it with the ownership handover or
// release. [Guard.MayWrite] refuses a set named there, so a pass of a
// retired set's controller whose view still shows the set live (an informer
// that lags) cannot give the object back to a set that is going or gone,
// for the garbage collector to take.
const ReleasedAnnotation = "handoff.kube-handoff.io/released-from"

// releasedKept is how many sets ReleasedAnnotation remembers.
const releasedKept = 3

// released returns the ReleasedAnnotation value after a release from uid.
func released(prev string, uid types.UID) string {
	out := []string{string(uid)}
	for _, u := range strings.Split(prev, ",") {
		if u != "" && u != string(uid) && len(out) < releasedKept {
			out = append(out, u)
		}
	}
	return strings.Join(out, ",")
}

// MayWrite reports whether the set may write live, the object as just read
// from the cluster, that it lists; when it may not, reason names what stops
// it. It asks [Guard.MayApply] first, then finds the set that last wrote
// the object: its controller ownerReference when that names a set of the
// guard's kind, else the [WriterAnnotation] mark. It refuses an object
// released from this set by its retirement ([ReleasedAnnotation]), and one
// this set wrote for a newer generation of its spec than the view holds (a
// lagging pass would revert an update in place). It refuses to take the
// object from another set unless the guard's view of the family shows that
// set being deleted, or superseded while this one is not:
//
//   - a writer the view does not hold is newer than the view (a set
//     controller's cache can lag behind the executor), and writing its
//     object back would revert it — unless its mark says it was created
//     before this set: then it is an older set that is gone (a controller
//     ownerReference to a gone set is removed by the garbage collector; a
//     mark stays, and must not lock the object forever);
//   - a live set that is not superseded keeps what it wrote, so two
//     current sets that list one resource do not fight over it;
//   - two superseded sets (siblings of an old generation) leave each
//     other's objects alone, so ownership does not go back and forth.
//
// It needs set.Object (which [Family.Observe] sets) to know the set kind.
// Write the object back with the resourceVersion read (an update, not a
// blind apply), stamped with [Guard.Stamp]: a write by another set between
// the read and the update then fails with a conflict instead of being
// reverted. An object with neither a set controller nor a mark is the
// guard's to decide by MayApply alone.
func (g Guard) MayWrite(live *unstructured.Unstructured) (ok bool, reason string) {
	r := RefOf(live)
	if ok, reason := g.MayApply(r); !ok {
		return false, reason
	}
	if slices.Contains(strings.Split(live.GetAnnotations()[ReleasedAnnotation], ","), string(g.set.UID)) {
		return false, fmt.Sprintf("%s was released from set %s when it retired", r, g.set.Name)
	}
	writer, by, st := g.writer(live)
	switch {
	case writer == "":
		return true, ""
	case writer == g.set.UID && st.uid == g.set.UID && st.generation > g.generation():
		return false, fmt.Sprintf("%s was written for generation %d of set %s, newer than this view's %d", r, st.generation, g.set.Name, g.generation())
	case writer == g.set.UID:
		return true, ""
	}
	if other, ok := g.strange[writer]; ok {
		if other.Deleting {
			return true, ""
		}
		return false, fmt.Sprintf("%s was written by live set %s of another family", r, other.Name)
	}
	other, known := g.known[writer]
	switch {
	case !known && st.uid == writer && !st.created.IsZero() && st.created.Before(g.set.Created):
		return true, ""
	case !known:
		return false, fmt.Sprintf("%s was written by set %s (uid %s), newer than this view of the family", r, by, writer)
	case other.Deleting:
		return true, ""
	case other.SupersededBy != "" && g.set.SupersededBy == "":
		return true, ""
	}
	return false, fmt.Sprintf("%s was written by set %s of generation %s, which this set does not supersede", r, other.Name, other.Generation)
}

// writer returns the UID (and, where known, the name, and from a mark the
// creation time) of the set that last wrote live, or "" when no set of the
// guard's kind did.
func (g Guard) writer(live *unstructured.Unstructured) (uid types.UID, name string, st stamp) {
	st = parseStamp(live.GetAnnotations()[WriterAnnotation])
	if owner := metav1.GetControllerOfNoCopy(live); owner != nil {
		gv, err := schema.ParseGroupVersion(owner.APIVersion)
		if err == nil && !g.kind.Empty() && (schema.GroupKind{Group: gv.Group, Kind: owner.Kind}) == g.kind {
			return owner.UID, owner.Name, st
		}
		return "", "", st // controlled by something else: not the guard's to decide
	}
	return st.uid, string(st.uid), st
}

// MayApply is [NewGuard] followed by [Guard.MayApply], for a single question.
func MayApply(set Set, r Ref, family []Set) bool {
	ok, _ := NewGuard(set, family).MayApply(r)
	return ok
}
