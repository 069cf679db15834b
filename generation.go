package handoff

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels and annotations the library writes on the sets it manages.
const (
	// DefaultRoleLabel carries a set's role on sets the executor creates.
	DefaultRoleLabel = "handoff.kube-handoff.io/role"
	// DefaultSupersededAnnotation names the generation that supersedes a set.
	// A set controller that finds it on its set must not write resources the
	// superseding generation also lists (see [Guard]).
	DefaultSupersededAnnotation = "handoff.kube-handoff.io/superseded-by"
	// DroppedAnnotation lists, as JSON, the resources an update in place
	// took out of a set (a target namespace that moved, a manifest that
	// went): the executor writes it with the update and prunes them once
	// the set is Ready for its new spec ([ActionPrune]). So that the set
	// stays writable, the record takes at most 128 KiB, and no more than
	// keeps the set's annotations within 192 KiB of the API server's
	// 256 KiB and the set within 1.4 MiB of etcd's 1.5 MiB; an update that
	// drops more is made all the same and fails with
	// [ErrDroppedUnrecorded] naming what the record left out, which is
	// not pruned. A family with [Family.DroppedSets] keeps the record in
	// sets of its own instead, whatever its size, and only reads and
	// prunes this annotation, as versions before it wrote it.
	DroppedAnnotation = "handoff.kube-handoff.io/dropped"
)

// Family describes one family of sets: the sets of one component and type,
// found with one label selector, and how to read them. The library never
// plans, writes or deletes anything for a set outside its family.
//
// tektoncd/operator's main sets of TektonPipeline are the family with
// Resource operator.tekton.dev/v1alpha1 tektoninstallersets, Kind
// TektonInstallerSet, Selector {operator.tekton.dev/created-by:
// TektonPipeline, operator.tekton.dev/type: main} and GenerationLabel
// operator.tekton.dev/release-version.
type Family struct {
	// Resource is the set kind's resource. Sets are cluster-scoped unless
	// Namespaced says otherwise.
	Resource schema.GroupVersionResource
	// Namespaced says the set kind is namespaced (package inventory's
	// ConfigMaps): the family's sets live in Namespace, which must then
	// be set. False for a cluster-scoped set kind (TektonInstallerSet).
	Namespaced bool
	// Namespace is where the sets of a namespaced set kind live: the
	// executor's default Sets and SetsMetadata address it. Set only with
	// Namespaced.
	Namespace string
	// Kind is the set kind, for ownerReferences.
	Kind string
	// Selector holds the labels every set of the family carries. It must
	// not be empty: an empty selector would take in every set of the kind.
	Selector map[string]string
	// GenerationLabel holds a set's generation ID.
	GenerationLabel string
	// RoleLabel holds a set's role; empty means [DefaultRoleLabel].
	RoleLabel string
	// RoleOf classifies sets that carry no role label, such as sets made
	// before the library was used. Nil means such sets are invalid.
	RoleOf func(set *unstructured.Unstructured) (role string, ok bool)
	// HashAnnotation holds a hash of a set's content; a change of it within
	// one generation is an update in place. Empty means no hashes.
	HashAnnotation string
	// SupersededAnnotation marks a set superseded by a newer generation;
	// empty means [DefaultSupersededAnnotation].
	SupersededAnnotation string
	// Resources lists the resources a set holds. Nil means [Manifests]
	// with the set's spec.manifests. On an error it returns the resources
	// it could read all the same: the set is invalid, and still counts as
	// their lister.
	Resources func(set *unstructured.Unstructured) ([]Ref, error)
	// TargetNamespace is the namespace that namespaced resources listed
	// without one land in (tektoncd/operator: the set's
	// operator.tekton.dev/target-namespace annotation). Nil leaves them
	// without a namespace.
	TargetNamespace func(set *unstructured.Unstructured) string
	// ClusterScoped tells which kinds have no namespace, so that
	// TargetNamespace is not applied to them. Nil means the executor's REST
	// mapper where the executor has one (cluster-scoped custom kinds, such
	// as Tekton Triggers' ClusterInterceptors, are known only to it), and
	// [WellKnownClusterScoped] otherwise and for kinds the mapper does not
	// know; [ScopeFrom] builds the same from a mapper for a set controller.
	ClusterScoped func(schema.GroupKind) bool
	// Probe tells whether a set is Ready; nil means [ConditionProbe]{}.
	Probe Probe
	// KindSelector holds labels every set of the kind carries, whatever
	// its family. The executor lists the sets of other families (to
	// delete nothing they list, see [Executor.Finalize]) with it; empty
	// lists every object of the set resource, which suits a set kind of
	// its own (TektonInstallerSet) but not one shared with other uses,
	// such as the ConfigMaps of inventory sets.
	KindSelector map[string]string
	// DroppedSets, if set, keeps the record of what an update in place
	// takes out of a set ([Set.Dropped]) in sets of the family of their
	// own rather than in [DroppedAnnotation], so that no move or shrink is
	// too large to record. It returns the content of sets that list
	// dropped, resources the live set lists, each small enough to store
	// (package inventory's: ConfigMaps of at most Inventory.MaxBytes of
	// data, as its parts are), as Build does. The executor names each
	// NamePrefix + [DroppedRolePrefix] + a hash, gives it the set's
	// generation and that role, marks it superseded by that generation and
	// creates it before the update; the planner then treats it as a set
	// of a role the generation does not have: it is retired once every
	// set of the generation is Ready, and its retirement deletes what no
	// live set lists. Use it only for a set kind that no controller acts
	// on (an inventory): a set controller would apply what such a set
	// lists.
	DroppedSets func(set *unstructured.Unstructured, dropped []Ref) ([]*unstructured.Unstructured, error)
	// NamePrefix starts the deterministic name of the sets the executor
	// creates: NamePrefix + role + "-" + a hash of the generation. For
	// tektoncd/operator that is "<kind>-main-", giving names such as
	// pipeline-main-static-0f1e2d3c4b, in the shape GenerateName gave.
	NamePrefix string
}

// Validate reports a family that cannot be used safely: a [*ConfigError]
// naming every field at fault (Family.Resource, Family.Selector,
// Family.GenerationLabel, Family.KindSelector, Family.Namespace,
// Family.Namespaced), which matches [ErrInvalidFamily]. Label and
// annotation keys that are not qualified names and selector values that
// are not label values are faults too: the API server would refuse the
// List, or the sets, the executor makes with them.
func (f Family) Validate() error {
	ps := f.problems()
	if len(ps) == 0 {
		return nil
	}
	for i := range ps {
		ps[i].Field = "Family." + ps[i].Field
	}
	return &ConfigError{Object: f.describe(), Problems: ps}
}

// validLabel reports a label the API server would refuse: a key that is
// not a qualified name, a value that is not a label value.
func validLabel(key, value string) error {
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return fmt.Errorf("key %q: %s", key, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return fmt.Errorf("value %q: %s", value, strings.Join(msgs, "; "))
	}
	return nil
}

func (f Family) roleLabel() string {
	if f.RoleLabel == "" {
		return DefaultRoleLabel
	}
	return f.RoleLabel
}

func (f Family) supersededAnnotation() string {
	if f.SupersededAnnotation == "" {
		return DefaultSupersededAnnotation
	}
	return f.SupersededAnnotation
}

// typeMeta gives obj the family's set apiVersion and kind when it has none,
// as a typed object converted to unstructured has none.
func (f Family) typeMeta(obj *unstructured.Unstructured) {
	if obj.GetKind() == "" {
		obj.SetAPIVersion(f.Resource.GroupVersion().String())
		obj.SetKind(f.Kind)
	}
}

// LabelSelector returns the family's selector for List calls.
func (f Family) LabelSelector() labels.Selector {
	return labels.SelectorFromSet(f.Selector)
}

// Contains reports whether an object's labels place it in the family.
func (f Family) Contains(labelSet map[string]string) bool {
	return len(f.Selector) > 0 && f.LabelSelector().Matches(labels.Set(labelSet))
}

// SetName returns the deterministic name of the set of a generation and
// role. Creating by this name, rather than by GenerateName, makes a retried
// create after a lost response fail with AlreadyExists instead of making a
// duplicate.
func (f Family) SetName(generation, role string) string {
	sum := sha256.Sum256([]byte(generation))
	return f.NamePrefix + role + "-" + hex.EncodeToString(sum[:5])
}

// Set is one observed set of a family, reduced to what planning and
// finalization need.
type Set struct {
	// Name and UID identify the set object; retirement is preconditioned
	// on the UID.
	Name string
	UID  types.UID
	// Generation is the value of [Family.GenerationLabel].
	Generation string
	// Role is the set's role, from [Family.RoleLabel] or [Family.RoleOf].
	Role string
	// Created is the creationTimestamp; the oldest of duplicates is kept.
	Created time.Time
	// Deleting is true once the set has a deletionTimestamp. A deleting set
	// is never Ready and never a successor.
	Deleting bool
	// SupersededBy is the generation that superseded this set, if any.
	SupersededBy string
	// Readiness is what [Family.Probe] says of the set.
	Readiness Readiness
	// Hash is the content hash from [Family.HashAnnotation].
	Hash string
	// Resources are the identities of the resources the set lists.
	Resources []Ref
	// Dropped are the resources an update in place took out of the set,
	// still to be pruned, as [DroppedAnnotation] records them (a family
	// with [Family.DroppedSets] records them in sets of their own, whose
	// Resources they are).
	Dropped []Ref
	// Labels are the set's labels, kept so that the Planner can check
	// family membership.
	Labels map[string]string
	// Object is the set as it was read; nil for sets built by hand in tests.
	Object *unstructured.Unstructured
	// Invalid says why the set could not be read whole (no generation, no
	// role, unreadable manifests); nil for a valid set. The library never
	// plans for, retires or deletes an invalid set, and counts it as a
	// lister of the Resources it could read, so no other set's finalization
	// deletes them.
	Invalid error
}

// String renders the set for a log line: name (generation/role).
func (s Set) String() string { return fmt.Sprintf("%s (%s/%s)", s.Name, s.Generation, s.Role) }

// Observe reads a set of the family. It fails with an error wrapping
// [ErrInvalidSet] when the object is not in the family or lacks its
// generation or role, or when its resources cannot all be read; the Set
// returned with such an error is as much as could be read, with
// [Set.Invalid] holding the error.
//
// A set carrying the superseded annotation is not Ready, whatever its
// condition says: a set released by a rollback is Ready again only once its
// controller has applied it and reported so (see [ReasonSuperseded]).
func (f Family) Observe(u *unstructured.Unstructured) (Set, error) {
	lbls := u.GetLabels()
	s := Set{
		Name:       u.GetName(),
		UID:        u.GetUID(),
		Generation: lbls[f.GenerationLabel],
		Role:       lbls[f.roleLabel()],
		Created:    u.GetCreationTimestamp().Time,
		Deleting:   u.GetDeletionTimestamp() != nil,
		Labels:     lbls,
		Object:     u,
	}
	if !f.Contains(lbls) {
		return s, f.invalid(&s, fmt.Errorf("labels %v do not match family selector %v", lbls, f.Selector))
	}
	if s.Role == "" && f.RoleOf != nil {
		s.Role, _ = f.RoleOf(u)
	}
	ann := u.GetAnnotations()
	s.SupersededBy = ann[f.supersededAnnotation()]
	if f.HashAnnotation != "" {
		s.Hash = ann[f.HashAnnotation]
	}
	if v := ann[DroppedAnnotation]; v != "" {
		if err := json.Unmarshal([]byte(v), &s.Dropped); err != nil {
			return s, f.invalid(&s, fmt.Errorf("annotation %s: %w", DroppedAnnotation, err))
		}
	}
	probe := f.Probe
	if probe == nil {
		probe = ConditionProbe{}
	}
	switch {
	case s.Deleting:
		s.Readiness = Readiness{State: NotReady, Reason: "Deleting", Message: "set is being deleted"}
	case s.SupersededBy != "":
		s.Readiness = Readiness{State: NotReady, Reason: ReasonSuperseded, Message: "superseded by generation " + s.SupersededBy}
	default:
		s.Readiness = probe.Ready(u)
	}
	refs, rerr := f.resources(u)
	s.Resources = refs
	switch {
	case s.Generation == "":
		return s, f.invalid(&s, fmt.Errorf("no generation label %q", f.GenerationLabel))
	case s.Role == "":
		return s, f.invalid(&s, fmt.Errorf("no role label %q and no role could be derived", f.roleLabel()))
	case rerr != nil:
		return s, f.invalid(&s, rerr)
	}
	return s, nil
}

// resources reads the resources a set of the family's kind lists, with
// [Family.Resources], namespaced as [Family.TargetNamespace] says.
func (f Family) resources(u *unstructured.Unstructured) ([]Ref, error) {
	read := f.Resources
	if read == nil {
		read = func(u *unstructured.Unstructured) ([]Ref, error) { return Manifests(u, "spec", "manifests") }
	}
	refs, err := read(u)
	if f.TargetNamespace != nil {
		if ns := f.TargetNamespace(u); ns != "" {
			scoped := f.ClusterScoped
			if scoped == nil {
				scoped = WellKnownClusterScoped
			}
			for i := range refs {
				if refs[i].Namespace == "" && !scoped(refs[i].GroupKind()) {
					refs[i].Namespace = ns
				}
			}
		}
	}
	return refs, err
}

func (f Family) invalid(s *Set, err error) error {
	s.Invalid = &SetError{Name: s.Name, Err: fmt.Errorf("%w: %w", ErrInvalidSet, err)}
	return s.Invalid
}

// ObserveAll reads every object of a List of the family, in the given
// order. Sets that cannot be read whole are returned too, with
// [Set.Invalid] set, and the error joins their errors: a caller acting on
// the valid sets goes on, one that needs all of them stops.
func (f Family) ObserveAll(items []unstructured.Unstructured) ([]Set, error) {
	out := make([]Set, 0, len(items))
	var errs []error
	for i := range items {
		s, err := f.Observe(&items[i])
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// Manifests reads the identities of the objects in the list at fields of u,
// such as spec.manifests of a TektonInstallerSet. Every entry must have a
// kind and a name; the identities of the entries that have them are
// returned even when others do not, with an error naming each bad entry.
func Manifests(u *unstructured.Unstructured, fields ...string) ([]Ref, error) {
	// Read in place: NestedSlice would deep-copy every manifest on every
	// reconcile, and only the identities are needed.
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if err != nil || !found {
		return nil, err
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %T, not a list", strings.Join(fields, "."), v)
	}
	refs := make([]Ref, 0, len(items))
	var errs []error
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s[%d] is not an object", strings.Join(fields, "."), i))
			continue
		}
		r := RefOf(&unstructured.Unstructured{Object: m})
		if r.Kind == "" || r.Name == "" {
			errs = append(errs, fmt.Errorf("%s[%d] has no kind or name", strings.Join(fields, "."), i))
			continue
		}
		refs = append(refs, r)
	}
	return refs, errors.Join(errs...)
}

var wellKnownClusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "PersistentVolume"}: true,
	{Kind: "Node"}:             true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "policy", Kind: "PodSecurityPolicy"}:                                      true,
}

// WellKnownClusterScoped reports whether gk is one of the cluster-scoped
// kinds built into Kubernetes that operators commonly install.
func WellKnownClusterScoped(gk schema.GroupKind) bool { return wellKnownClusterScoped[gk] }

// Desired is the generation the caller wants installed.
type Desired struct {
	// Generation is the generation ID, such as a release version.
	Generation string
	// Roles are the generation's roles, in dependency order: a role's
	// dependencies come before it. Retirement goes in reverse order.
	Roles []Role
	// Build, if set, makes the generation's sets in place of
	// [Executor.Build]: the manifests a generation is built from change
	// with it, so an executor made once for the process takes them with
	// each Desired (package inventory's Generation sets it).
	Build BuildFunc
}

// Role is one set of the desired generation.
type Role struct {
	// Name is the role, e.g. static or deployment.
	Name string
	// After names roles whose sets must be Ready before this role's set is
	// created (tektoncd/operator: deployment after static).
	After []string
	// Resources the role's set lists. The Planner does not need them; the
	// executor and the dry run report them.
	Resources []Ref
	// Hash is the content hash; a set of this role with another hash is
	// updated in place. Empty means the content is not compared.
	Hash string
}

// NewRole describes one role of a desired generation from the objects its
// set will list, as the operator applies them: their identities as
// Resources and, as Hash, the first 16 hex digits of the SHA-256 of the
// objects as JSON in the order given, so that a change of any of them is
// an update in place of the role's set, and the same objects make the
// same hash in every process. after names the roles whose sets must be
// Ready first. It fails, naming the object, on one that JSON cannot
// encode.
func NewRole(name string, objs []unstructured.Unstructured, after ...string) (Role, error) {
	r := Role{Name: name, After: slices.Clone(after), Resources: make([]Ref, len(objs))}
	h := sha256.New()
	enc := json.NewEncoder(h)
	for i := range objs {
		r.Resources[i] = RefOf(&objs[i])
		if err := enc.Encode(objs[i].Object); err != nil {
			return Role{}, fmt.Errorf("role %s: %s: %w", name, r.Resources[i], err)
		}
	}
	r.Hash = hex.EncodeToString(h.Sum(nil))[:16]
	return r, nil
}
