package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/kube-handoff/handoff"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Generation is the inventory of one generation of a component: the
// desired generation to hand to [handoff.Executor.Step], which builds
// each of its ConfigMaps with [Generation.Build] (Desired.Build is set to
// it, so the executor needs no Build of its own).
//
// The entries, sorted by data key, are filled in order into parts of at
// most [Inventory.MaxBytes] of data each; part i is role "part-i", whose
// hash is that of its data. The same objects in any order make the same
// parts, names and hashes. A change within one generation (a target
// namespace that moves) changes the hash of the parts it touches, which
// the executor updates in place; the parts are independent (no role
// waits for another).
type Generation struct {
	// Desired is the generation the executor is to install.
	Desired *handoff.Desired
	// Entries are the generation's entries, sorted by data key.
	Entries []Entry

	inv      Inventory
	name     string // the generation as the operator named it
	parts    map[string][]Entry
	versions func(schema.GroupKind) []string
}

// entryBytes is what an entry adds to the JSON of a ConfigMap's data:
// "key":"value", (keys and values hold nothing JSON escapes).
func entryBytes(e Entry) int { return len(e.Key()) + len(e.APIVersion) + 6 }

// Generation records objs, the objects of one generation as the operator
// applies them (namespaces set, after its transformers), as the desired
// generation named generation: any non-empty name, such as a release
// version. Desired.Generation, the value of [GenerationLabel], is
// [LabelValue] of it (the name itself when it is a label value; a
// version such as "1.2.3+build.7" is hashed), and the ConfigMaps of a
// hashed one keep it whole in [GenerationNameAnnotation]. It fails,
// recording nothing, when the inventory is invalid or the name empty, or
// when any object cannot be recorded or two objects share an identity;
// such errors are [*ObjectError]s naming each object, wrapping
// [ErrInvalidInventory].
func (inv Inventory) Generation(generation string, objs []unstructured.Unstructured) (*Generation, error) {
	if err := inv.Validate(); err != nil {
		return nil, err
	}
	if generation == "" {
		return nil, fmt.Errorf("%w: inventory of %s: no generation", handoff.ErrInvalidDesired, inv.Component)
	}
	entries, err := Entries(objs)
	if err != nil {
		return nil, fmt.Errorf("inventory of %s, generation %s: %w", inv.Component, generation, err)
	}
	g := &Generation{
		Desired:  &handoff.Desired{Generation: LabelValue(generation)},
		name:     generation,
		Entries:  entries,
		inv:      inv,
		parts:    map[string][]Entry{},
		versions: versions(entries),
	}
	g.Desired.Build = g.Build
	for i, part := range chunk(entries, inv.maxBytes()) {
		role := RolePrefix + strconv.Itoa(i)
		g.parts[role] = part
		g.Desired.Roles = append(g.Desired.Roles, handoff.Role{Name: role, Resources: refs(part), Hash: hash(part)})
	}
	return g, nil
}

// chunk fills entries, in order, into parts whose data takes at most
// maxBytes as JSON; no entries are one empty part.
func chunk(entries []Entry, maxBytes int) [][]Entry {
	budget := maxBytes - 2 // the braces of the data object
	var parts [][]Entry
	var part []Entry
	size := 0
	for _, e := range entries {
		if n := entryBytes(e); len(part) > 0 && size+n > budget {
			parts = append(parts, part)
			part, size = nil, 0
		}
		part = append(part, e)
		size += entryBytes(e)
	}
	if len(part) > 0 || len(parts) == 0 {
		parts = append(parts, part)
	}
	return parts
}

// hash returns the hash of a part's data.
func hash(part []Entry) string {
	h := sha256.New()
	for _, e := range part {
		h.Write([]byte(e.Key()))
		h.Write([]byte{0})
		h.Write([]byte(e.APIVersion))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Part returns the entries of one role, and whether the generation has it.
func (g *Generation) Part(role string) ([]Entry, bool) {
	p, ok := g.parts[role]
	return p, ok
}

// Versions returns the API versions (the version part, such as "v1")
// the generation's objects of a kind were recorded at; pass it as handoff.ManifestivalObjects.Versions, newer generation first.
func (g *Generation) Versions(gk schema.GroupKind) []string { return g.versions(gk) }

// Build builds the ConfigMap of one role of the generation: apiVersion v1,
// kind ConfigMap, in the inventory's namespace, with one data entry per
// object and [CountAnnotation]. The executor names it and adds the
// family's labels, the role label and the hash annotation. It is a
// [handoff.BuildFunc].
func (g *Generation) Build(_ context.Context, d handoff.Desired, role handoff.Role) (*unstructured.Unstructured, error) {
	if d.Generation != g.Desired.Generation {
		return nil, fmt.Errorf("%w: asked for generation %q of the inventory of generation %q", handoff.ErrInvalidDesired, d.Generation, g.Desired.Generation)
	}
	part, ok := g.parts[role.Name]
	if !ok {
		return nil, &handoff.RoleError{Role: role.Name, Err: fmt.Errorf("%w: generation %s has %d parts", handoff.ErrInvalidDesired, d.Generation, len(g.parts))}
	}
	cm := g.inv.configMap(part)
	ann := cm.GetAnnotations()
	if g.name != g.Desired.Generation {
		ann[GenerationNameAnnotation] = g.name
	}
	cm.SetAnnotations(ann)
	return cm, nil
}

// configMap builds the ConfigMap that records part, as Build does.
func (inv Inventory) configMap(part []Entry) *unstructured.Unstructured {
	data := make(map[string]any, len(part))
	for _, e := range part {
		data[e.Key()] = e.APIVersion
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}}
	cm.SetNamespace(inv.Namespace)
	ann := map[string]string{CountAnnotation: strconv.Itoa(len(part))}
	if c := LabelValue(inv.Component); c != inv.Component {
		ann[ComponentNameAnnotation] = inv.Component
	}
	cm.SetAnnotations(ann)
	if o := inv.Owner; o != nil {
		cm.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID}})
	}
	return cm
}

// droppedSets is the family's [handoff.Family.DroppedSets]: the entries of
// dropped, at the API versions set recorded them at, in ConfigMaps of at
// most MaxBytes of data each, as the parts of a generation are.
func (inv Inventory) droppedSets(set *unstructured.Unstructured, dropped []handoff.Ref) ([]*unstructured.Unstructured, error) {
	recorded, err := decode(set)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", set.GetName(), err)
	}
	version := make(map[handoff.Ref]string, len(recorded))
	for _, e := range recorded {
		version[e.Ref] = e.APIVersion
	}
	entries := make([]Entry, 0, len(dropped))
	for _, ref := range dropped {
		v, ok := version[ref]
		if !ok {
			return nil, fmt.Errorf("%s: %w", set.GetName(), invalid("%s is not recorded here", ref))
		}
		entries = append(entries, Entry{Ref: ref, APIVersion: v})
	}
	sortEntries(entries)
	parts := chunk(entries, inv.maxBytes())
	out := make([]*unstructured.Unstructured, len(parts))
	for i, part := range parts {
		out[i] = inv.configMap(part)
	}
	return out, nil
}
