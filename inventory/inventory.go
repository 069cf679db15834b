package inventory

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// Labels and annotations of inventory ConfigMaps.
const (
	// ComponentLabel holds the component an inventory ConfigMap records;
	// it is part of the family selector.
	ComponentLabel = "handoff.kube-handoff.io/inventory"
	// SetKindLabel, set to [SetKind], marks every inventory ConfigMap,
	// whatever its component: the family's [handoff.Family.KindSelector],
	// so that the executor's List of other families' sets reads
	// inventories only, never every ConfigMap of the namespace.
	SetKindLabel = "handoff.kube-handoff.io/set-kind"
	SetKind      = "inventory"
	// GenerationLabel holds the generation an inventory ConfigMap records.
	GenerationLabel = "handoff.kube-handoff.io/generation"
	// HashAnnotation holds the hash of a ConfigMap's data; another hash
	// for the same generation and role is an update in place.
	HashAnnotation = "handoff.kube-handoff.io/hash"
	// CountAnnotation holds the number of entries a ConfigMap records.
	CountAnnotation = "handoff.kube-handoff.io/inventory-count"
)

// RolePrefix starts the role of each part of a generation: part-0,
// part-1, and so on.
const RolePrefix = "part-"

// Data budgets of one ConfigMap, in bytes of JSON-encoded data.
const (
	// DefaultMaxBytes is half the 1 MiB a ConfigMap's data may hold. The
	// API server also records every data key in the object's
	// managedFields, so a stored inventory holds its keys twice; at half
	// the limit the whole object, managedFields included, stays under
	// 1 MiB and well under etcd's 1.5 MiB request limit.
	DefaultMaxBytes = 512 * 1024
	// MinMaxBytes is the smallest budget accepted: room for a few of the
	// largest entries.
	MinMaxBytes = 4 * 1024
	// LimitBytes is the most a ConfigMap's data may hold.
	LimitBytes = 1024 * 1024
)

// ConfigMaps is the resource of inventory sets.
var ConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// Inventory describes the inventory sets of one component: where they
// live, how they are labelled and how large each may grow. The zero value
// is not usable: Namespace and Component are required.
type Inventory struct {
	// Namespace is where the ConfigMaps live. Families see each other's
	// sets only within one namespace (the executor lists other families'
	// sets to delete nothing they still list), so the components of one
	// operator keep their inventories in one namespace, such as the
	// operator's own; with a namespaced [Inventory.Owner], that is the
	// owner's namespace.
	Namespace string
	// Component names the component, such as "knative-serving": the value
	// of [ComponentLabel] and the start of the ConfigMaps' names,
	// Component + "-inventory-part-N-<hash of the generation>". Any
	// non-empty name will do: one that is no label value (longer than 63
	// characters, a space, a colon) is labelled as [LabelValue] makes it,
	// one that makes no valid object name (capitals) starts the names in a
	// hashed form of lower-case letters, and the ConfigMaps then keep it
	// whole in [ComponentNameAnnotation].
	Component string
	// Selector holds extra labels every ConfigMap of the component
	// carries, such as the operator's app label; optional. It may not set
	// the labels the package writes.
	Selector map[string]string
	// MaxBytes bounds the JSON-encoded data of one ConfigMap; a generation
	// that needs more is spread over several. Zero means
	// [DefaultMaxBytes].
	MaxBytes int
	// Probe decides whether a set is Ready; it becomes
	// [handoff.Family.Probe]. An inventory has no controller and no
	// status: nil means handoff.RolloutProbe{Stamped: true}, which reads
	// the rollout of the workloads, CRDs and APIServices a set lists and
	// counts one only once the operator applied it for that set, stamped
	// with [Stamp]. An operator that does not stamp what it applies gives
	// handoff.RolloutProbe{} here, and must then apply the new generation
	// in the reconcile that records it, before any later Step can see it
	// Ready.
	Probe handoff.Probe
	// Owner, if set, is the component object the inventories belong to:
	// each ConfigMap of the family gets an ownerReference to it (neither
	// controller nor blocking), added on its next update to one recorded
	// without, so that the inventories go with the object (the garbage
	// collector deletes them once it is gone, as after a rollback to an
	// operator that knows nothing of them) and a watch maps each
	// ConfigMap back to it (controller-runtime's
	// handler.EnqueueRequestForOwner). An ownerReference reaches no
	// further than its object's namespace, and the garbage collector
	// deletes a namespaced object whose owner is not found there, so a
	// namespaced owner must live in Namespace; Validate refuses one that
	// does not.
	Owner *Owner
}

// Owner is the object an inventory's ConfigMaps belong to (see
// [Inventory.Owner]).
type Owner struct {
	// APIVersion, Kind, Name and UID name the object, as an
	// ownerReference does.
	APIVersion, Kind, Name string
	UID                    types.UID
	// Namespace is the object's namespace; empty for a cluster-scoped one.
	Namespace string
}

// OwnerOf returns the Owner that obj, the component object, makes.
func OwnerOf(obj *unstructured.Unstructured) *Owner {
	return &Owner{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(), Namespace: obj.GetNamespace()}
}

func (inv Inventory) maxBytes() int {
	if inv.MaxBytes == 0 {
		return DefaultMaxBytes
	}
	return inv.MaxBytes
}

// NamePrefix is the start of the names of the component's ConfigMaps.
func (inv Inventory) NamePrefix() string { return namePart(inv.Component) + "-inventory-" }

// fixedLabels are the labels the package writes on every ConfigMap.
func (inv Inventory) fixedLabels() map[string]string {
	return map[string]string{ComponentLabel: LabelValue(inv.Component), SetKindLabel: SetKind}
}

// Validate reports an inventory that cannot be used: no namespace, no
// component (any other is labelled and named in a hashed form), extra labels
// that clash with the package's own or that the API server refuses (a key
// that is no qualified name, a value that is no label value), a budget
// out of range.
func (inv Inventory) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: inventory of %q: "+format, append([]any{handoff.ErrInvalidFamily, inv.Component}, args...)...)
	}
	if msgs := validation.IsDNS1123Label(inv.Namespace); len(msgs) > 0 {
		return bad("namespace %q: %s", inv.Namespace, strings.Join(msgs, "; "))
	}
	if inv.Component == "" {
		return bad("no component")
	}
	if o := inv.Owner; o != nil {
		switch {
		case o.APIVersion == "" || o.Kind == "" || o.Name == "" || o.UID == "":
			return bad("owner %s %s/%s (UID %q): an ownerReference needs apiVersion, kind, name and UID", o.Kind, o.Namespace, o.Name, o.UID)
		case o.Namespace != "" && o.Namespace != inv.Namespace:
			return bad("owner %s %s/%s is in another namespace than the inventory (%s): the garbage collector would take the inventory for an orphan and delete it", o.Kind, o.Namespace, o.Name, inv.Namespace)
		}
	}
	// The longest names: a part number of six digits is a million parts;
	// a record of what an update dropped has a role of 18 characters.
	for _, role := range []string{RolePrefix + "999999", handoff.DroppedRolePrefix + "0123456789"} {
		longest := inv.Family().SetName("g", role)
		if msgs := validation.IsDNS1123Subdomain(longest); len(msgs) > 0 {
			return bad("ConfigMap names such as %q: %s", longest, strings.Join(msgs, "; "))
		}
	}
	reserved := []string{ComponentLabel, SetKindLabel, GenerationLabel, handoff.DefaultRoleLabel}
	keys := make([]string, 0, len(inv.Selector))
	for k := range inv.Selector {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same error every time
	for _, k := range keys {
		if slices.Contains(reserved, k) {
			return bad("selector sets label %s, which the package writes", k)
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return bad("selector label key %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(inv.Selector[k]); len(msgs) > 0 {
			return bad("selector label %s: value %q: %s", k, inv.Selector[k], strings.Join(msgs, "; "))
		}
	}
	if b := inv.MaxBytes; b != 0 && (b < MinMaxBytes || b > LimitBytes) {
		return bad("MaxBytes %d is not within [%d, %d]", b, MinMaxBytes, LimitBytes)
	}
	return nil
}

// Family returns the family of the component's inventory sets, for
// [handoff.Executor.Family]. Its sets are ConfigMaps in Namespace: the
// family is Namespaced, with Namespace, so an executor without Sets
// addresses them there, and an empty Namespace fails the family's
// validation before the executor reads or writes anything. The sets own
// nothing, so the executor's PruneOptions want AnyUnowned (what the
// family applied has no set owner) and, where the operator makes its
// component object the owner of what it applies, that object's UID in
// Owners: [Inventory.PruneOptions] sets both.
//
// What an update in place takes out of a part (a namespace that moved,
// objects that went, entries that moved to another part as the generation
// grew or shrank) is recorded in ConfigMaps of the generation of their
// own, of at most MaxBytes of data each ([handoff.Family.DroppedSets]),
// created before the update: roles dropped-<hash>, superseded by their
// generation. They retire once the generation is rolled out, deleting
// what no live part lists, as the parts of an older generation do; no
// move is too large to record.
func (inv Inventory) Family() handoff.Family {
	sel := make(map[string]string, len(inv.Selector)+2)
	for k, v := range inv.Selector {
		sel[k] = v
	}
	for k, v := range inv.fixedLabels() {
		sel[k] = v
	}
	return handoff.Family{
		Resource:        ConfigMaps,
		Namespaced:      true,
		Namespace:       inv.Namespace,
		Kind:            "ConfigMap",
		Selector:        sel,
		KindSelector:    map[string]string{SetKindLabel: SetKind},
		GenerationLabel: GenerationLabel,
		RoleLabel:       handoff.DefaultRoleLabel,
		HashAnnotation:  HashAnnotation,
		Resources:       resources,
		Probe:           inv.probe(),
		DroppedSets:     inv.droppedSets,
		NamePrefix:      inv.NamePrefix(),
	}
}

// probe is [Inventory.Probe], or by default the rollout of what the set
// lists, counted only once applied for the set (see [Stamp]).
func (inv Inventory) probe() handoff.Probe {
	if inv.Probe == nil {
		return handoff.RolloutProbe{Stamped: true}
	}
	return inv.Probe
}

// PruneOptions returns what the retirement of the component's inventories
// may delete: [handoff.DefaultPruneOptions] with AnyUnowned (inventory sets
// own nothing, so whatever the family applied has no set owner) and owners
// as Owners: the UIDs of the objects the operator makes the owner of what
// it applies (knative/operator: the component object), none when it
// applies without ownerReferences. An object owned by anyone else is
// never deleted.
func (inv Inventory) PruneOptions(owners ...types.UID) handoff.PruneOptions {
	o := handoff.DefaultPruneOptions()
	o.AnyUnowned = true
	o.Owners = slices.Clone(owners)
	return o
}

// Executor returns the executor of the component's inventories over dyn
// and mapper: Family, Dynamic and Mapper set, the sets addressed in
// Namespace through Dynamic, and Prune from [Inventory.PruneOptions] with
// owners. It needs no Build: [Generation.Desired] carries its own, so one
// executor serves every generation of the component (Step with the
// Desired of the generation it steps to; a removal, Step with nil, builds
// nothing). The inventory is one component object's, and so is the
// executor: make it for the object being reconciled (no I/O) and set
// anything else it uses (Discovery, Metadata, Recorder and Component).
// Step and Finalize validate it ([handoff.Executor.Validate]) before
// anything else. The apply after a Step stamps from the Step's
// [handoff.Result.Family] (see [Stamp]), with no List of its own.
func (inv Inventory) Executor(dyn dynamic.Interface, mapper meta.RESTMapper, owners ...types.UID) *handoff.Executor {
	return &handoff.Executor{Family: inv.Family(), Dynamic: dyn, Mapper: mapper, Prune: inv.PruneOptions(owners...)}
}

// Sets returns the client of the component's inventory ConfigMaps, for
// [handoff.Executor.Sets] (which an executor over a dynamic client may
// leave nil: the family addresses the sets in Namespace).
func (inv Inventory) Sets(dyn dynamic.Interface) handoff.SetClient {
	return dyn.Resource(ConfigMaps).Namespace(inv.Namespace)
}

// SetsMetadata returns the client of the inventory ConfigMaps' metadata,
// for [handoff.Executor.SetsMetadata] beside [Inventory.Sets] when the
// executor has a [handoff.Executor.Metadata].
func (inv Inventory) SetsMetadata(md metadata.Interface) handoff.SetMetadataClient {
	return md.Resource(ConfigMaps).Namespace(inv.Namespace)
}
