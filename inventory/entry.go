package inventory

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidInventory is wrapped by every error about an object that
// cannot be recorded or an entry that cannot be read.
var ErrInvalidInventory = errors.New("invalid inventory")

// sep separates the fields of a data key. No namespace, group or kind can
// hold it; a name can (RBAC names are not DNS names), which is why a key
// is read from both ends: the namespace up to the first separator, the
// kind and group from the last two, the name in between.
const sep = "_"

// Entry is one object an inventory records: its identity and the API
// version it was applied at.
type Entry struct {
	// Ref is the object's identity (GroupKind + namespace + name).
	Ref handoff.Ref
	// APIVersion is the apiVersion the object was applied at, such as
	// "v1" or "apps/v1". A later read tries it first (see [Generation.Versions]).
	APIVersion string
}

// String renders the entry for a log line.
func (e Entry) String() string { return e.Ref.String() + " (" + e.APIVersion + ")" }

// Key is the entry's data key: namespace_name_group_kind, with an empty
// namespace for cluster-scoped objects and an empty group for the core
// group, as sigs.k8s.io/cli-utils keys its ConfigMap inventory.
func (e Entry) Key() string { return keyOf(e.Ref) }

// keyOf returns the data key of a reference (see [Entry.Key]).
func keyOf(r handoff.Ref) string {
	return r.Namespace + sep + r.Name + sep + r.Group + sep + r.Kind
}

// ObjectError reports an object that cannot be recorded, by its position
// in the list given and its identity as far as it has one.
type ObjectError struct {
	// Index is the object's position in the list given.
	Index int
	// Ref is the object's identity, possibly incomplete.
	Ref handoff.Ref
	// Err says what is wrong; it wraps [ErrInvalidInventory].
	Err error
}

func (e *ObjectError) Error() string { return fmt.Sprintf("object %d (%s): %v", e.Index, e.Ref, e.Err) }

// Unwrap returns the underlying error.
func (e *ObjectError) Unwrap() error { return e.Err }

// KeyError reports a data entry of an inventory ConfigMap that cannot be
// read, by its key.
type KeyError struct {
	// Key is the data key.
	Key string
	// Err says what is wrong; it wraps [ErrInvalidInventory].
	Err error
}

func (e *KeyError) Error() string { return fmt.Sprintf("key %q: %v", e.Key, e.Err) }

// Unwrap returns the underlying error.
func (e *KeyError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidInventory}, args...)...)
}

// entryOf returns the entry of an object, or why it cannot be recorded: it
// lacks a kind, a name or an API version, or a field holds what a data key
// cannot carry (a ConfigMap key is at most 253 characters of
// [-._a-zA-Z0-9]; an RBAC name with a colon, such as "system:auth", is
// refused).
func entryOf(obj *unstructured.Unstructured) (Entry, error) {
	e := Entry{Ref: handoff.RefOf(obj), APIVersion: obj.GetAPIVersion()}
	gv, err := schema.ParseGroupVersion(e.APIVersion)
	switch {
	case e.Ref.Kind == "":
		return e, invalid("no kind")
	case e.Ref.Name == "":
		return e, invalid("no name")
	case err != nil:
		return e, invalid("apiVersion %q: %v", e.APIVersion, err)
	case gv.Version == "":
		return e, invalid("no API version")
	}
	return e, e.check()
}

// check reports what keeps an entry from being written and read back.
func (e Entry) check() error {
	for _, f := range []struct{ what, v string }{{"namespace", e.Ref.Namespace}, {"group", e.Ref.Group}, {"kind", e.Ref.Kind}} {
		if strings.Contains(f.v, sep) {
			return invalid("%s %q holds %q", f.what, f.v, sep)
		}
	}
	if msgs := validation.IsConfigMapKey(e.Key()); len(msgs) > 0 {
		return invalid("data key %q: %s", e.Key(), strings.Join(msgs, "; "))
	}
	for _, c := range e.APIVersion {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '/') {
			return invalid("apiVersion %q holds %q", e.APIVersion, c)
		}
	}
	return nil
}

// Entries returns the entries of objs sorted by data key, or, when any
// object cannot be recorded or two share an identity at different API
// versions, an error naming each such object and no entries. An object
// listed again at the same API version is recorded once: knative/operator's
// releases list their CRDs and Namespace in two files, and apply them twice.
func Entries(objs []unstructured.Unstructured) ([]Entry, error) {
	out := make([]Entry, 0, len(objs))
	seen := make(map[handoff.Ref]int, len(objs)) // the index in out
	objIndex := make([]int, 0, len(objs))        // out[k] is objs[objIndex[k]]
	var errs []error
	for i := range objs {
		e, err := entryOf(&objs[i])
		if err != nil {
			errs = append(errs, &ObjectError{Index: i, Ref: e.Ref, Err: err})
			continue
		}
		if j, dup := seen[e.Ref]; dup {
			if out[j].APIVersion != e.APIVersion {
				errs = append(errs, &ObjectError{Index: i, Ref: e.Ref, Err: invalid("same object as object %d, at API version %s", objIndex[j], out[j].APIVersion)})
			}
			continue
		}
		seen[e.Ref] = len(out)
		objIndex = append(objIndex, i)
		out = append(out, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sortEntries(out)
	return out, nil
}

// sortEntries sorts es by data key, each key made once.
func sortEntries(es []Entry) {
	sort.Sort(byKey{es: es, keys: keysOf(es)})
}

func keysOf(es []Entry) []string {
	keys := make([]string, len(es))
	for i, e := range es {
		keys[i] = e.Key()
	}
	return keys
}

type byKey struct {
	es   []Entry
	keys []string
}

func (b byKey) Len() int           { return len(b.es) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.es[i], b.es[j] = b.es[j], b.es[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}

// ParseKey reads a data key back into a reference.
func ParseKey(key string) (handoff.Ref, error) {
	first := strings.Index(key, sep)
	last := strings.LastIndex(key, sep)
	if first < 0 || last == first {
		return handoff.Ref{}, invalid("not namespace%sname%sgroup%skind", sep, sep, sep)
	}
	mid := strings.LastIndex(key[:last], sep)
	if mid == first {
		return handoff.Ref{}, invalid("not namespace%sname%sgroup%skind", sep, sep, sep)
	}
	r := handoff.Ref{Namespace: key[:first], Name: key[first+1 : mid], Group: key[mid+1 : last], Kind: key[last+1:]}
	switch {
	case r.Name == "":
		return r, invalid("no name")
	case r.Kind == "":
		return r, invalid("no kind")
	}
	return r, nil
}

// parseEntry reads one data entry back.
func parseEntry(key string, val any) (Entry, error) {
	r, err := ParseKey(key)
	if err != nil {
		return Entry{}, err
	}
	v, ok := val.(string)
	if !ok {
		return Entry{}, invalid("value is %T, not a string", val)
	}
	gv, err := schema.ParseGroupVersion(v)
	switch {
	case err != nil:
		return Entry{}, invalid("value %q is not an apiVersion: %v", v, err)
	case gv.Version == "":
		return Entry{}, invalid("value %q has no version", v)
	case gv.Group != r.Group:
		return Entry{}, invalid("apiVersion %q is not of group %q", v, r.Group)
	}
	return Entry{Ref: r, APIVersion: v}, nil
}

// decode reads the entries an inventory ConfigMap records, sorted by data
// key. Every malformed entry is named in the error, which wraps
// [ErrInvalidInventory]; the entries that could be read are returned all
// the same, as [handoff.Family.Resources] requires.
func decode(cm *unstructured.Unstructured) ([]Entry, error) {
	v, found, err := unstructured.NestedFieldNoCopy(cm.Object, "data")
	if err != nil || !found || v == nil {
		return nil, err
	}
	data, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("data is %T, not a map", v)
	}
	out := make([]Entry, 0, len(data))
	var errs []error
	for k, val := range data {
		e, err := parseEntry(k, val)
		if err != nil {
			errs = append(errs, &KeyError{Key: k, Err: err})
			continue
		}
		out = append(out, e)
	}
	sortEntries(out)
	sort.Slice(errs, func(i, j int) bool { return errs[i].(*KeyError).Key < errs[j].(*KeyError).Key })
	return out, errors.Join(errs...)
}

// resources reads the references an inventory ConfigMap records; it is
// the [handoff.Family.Resources] of [Inventory.Family].
func resources(cm *unstructured.Unstructured) ([]handoff.Ref, error) {
	es, err := decode(cm)
	return refs(es), err
}

// refs returns the references of entries, in their order.
func refs(entries []Entry) []handoff.Ref {
	out := make([]handoff.Ref, len(entries))
	for i, e := range entries {
		out[i] = e.Ref
	}
	return out
}

// versions returns a function that answers, for a kind, the API versions
// (the version part, such as "v1") its entries were recorded at, in the
// order they first appear, as [handoff.ManifestVersions] does for
// manifests: pass it as [handoff.ManifestivalObjects.Versions]. Pass the
// newer generation's entries first.
func versions(entries ...[]Entry) func(schema.GroupKind) []string {
	v := map[schema.GroupKind][]string{}
	for _, es := range entries {
		for _, e := range es {
			gv, err := schema.ParseGroupVersion(e.APIVersion)
			if err != nil || gv.Version == "" {
				continue
			}
			gk := e.Ref.GroupKind()
			if !slices.Contains(v[gk], gv.Version) {
				v[gk] = append(v[gk], gv.Version)
			}
		}
	}
	return func(gk schema.GroupKind) []string { return v[gk] }
}
