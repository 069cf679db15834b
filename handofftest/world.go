package handofftest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kube-handoff/handoff"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SetResource is the resource of the sets a [World] uses, shaped like
// tektoncd/operator's TektonInstallerSet.
var SetResource = schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"}

// World is a fake cluster with one family of sets, an executor and a
// simulated set controller: everything an upgrade test needs.
//
// The world has one family, which the executor, the controller (its passes
// and its finalizer) and the checks of [World.Converge] all use. Read it
// from Family; change it with [World.SetFamily], which gives it to all of
// them at once (the executor and the controller's finalizer are
// [handoff.Executor] values, each with its own copy).
type World struct {
	// Cluster is the fake cluster everything runs on.
	Cluster *Cluster
	// Family is the component's family of sets. Change it with
	// [World.SetFamily], not by assigning to it.
	Family handoff.Family
	// Executor is the library's executor, acting as actor "executor".
	Executor *handoff.Executor
	// Controller is the simulated set controller, actor "controller". Its
	// Executor, which runs its finalizer, is a copy of Executor that talks
	// to the cluster as the controller.
	Controller *SetController
	// Manifests holds each desired role's manifests, by generation and role,
	// for the executor's Build function.
	Manifests Catalog
	// Plans receives every plan as it is made, if not nil.
	Plans io.Writer
}

// NewWorld makes a World for the family of one component kind, with the
// label keys tektoncd/operator uses.
func NewWorld(component string, opts ...Option) *World {
	c := NewCluster(opts...)
	c.Register(SetResource, "TektonInstallerSet", false)
	fam := handoff.Family{
		Resource:        SetResource,
		Kind:            "TektonInstallerSet",
		Selector:        map[string]string{"operator.tekton.dev/created-by": component, "operator.tekton.dev/type": "main"},
		GenerationLabel: "operator.tekton.dev/release-version",
		HashAnnotation:  "operator.tekton.dev/last-applied-hash",
		NamePrefix:      "component-main-",
	}
	w := &World{Cluster: c, Family: fam, Manifests: Catalog{}}
	prune := handoff.DefaultPruneOptions()
	w.Executor = &handoff.Executor{
		Family: fam, Dynamic: c.ClientFor("executor"), Mapper: c.Mapper(), Prune: prune,
		RoleOrder: []string{"static", "deployment", "statefulset"},
		Build:     w.build,
	}
	finalizer := *w.Executor
	finalizer.Dynamic = c.ClientFor("controller")
	w.Controller = &SetController{
		Executor: &finalizer, Client: c.ClientFor("controller"), Mapper: c.Mapper(),
		Finalizer: "tektoninstallersets.operator.tekton.dev", ReadyAfter: 2,
		// As tektoncd/operator: no ownerReference on CRDs, Namespaces and
		// admission webhook configurations (nor, here, APIServices).
		Unowned: append([]schema.GroupKind{{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, {Kind: "Namespace"}}, prune.Unowned...),
	}
	return w
}

// SetFamily makes fam the world's family: the executor's, the controller's
// (for its passes and its finalizer) and that of the checks Converge makes.
// Start from w.Family to change one field:
//
//	fam := w.Family
//	fam.RoleOf = legacyRole
//	w.SetFamily(fam)
func (w *World) SetFamily(fam handoff.Family) {
	w.Family = fam
	w.Executor.Family = fam
	if w.Controller.Executor != nil && w.Controller.Executor != w.Executor {
		w.Controller.Executor.Family = fam
	}
}

// Desire registers the manifests of a generation's roles and returns the
// matching desired generation; roles after the first wait for the first.
func (w *World) Desire(generation string, roles []string, manifests map[string][]*unstructured.Unstructured) *handoff.Desired {
	return w.Manifests.Desire(generation, roles, manifests)
}

// DesireHashed is [World.Desire] with each role's Hash set from its
// manifests (see [Catalog.DesireHashed]): registering a generation again
// with changed manifests makes the executor update its sets in place.
func (w *World) DesireHashed(generation string, roles []string, manifests map[string][]*unstructured.Unstructured) *handoff.Desired {
	return w.Manifests.DesireHashed(generation, roles, manifests)
}

// build reads w.Manifests when called, so the field may be replaced.
func (w *World) build(ctx context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
	return w.Manifests.Build(ctx, d, r)
}

// Catalog holds the manifests of each generation's roles, by generation and
// role. Its Build method is a [handoff.BuildFunc] for them.
type Catalog map[string]map[string][]*unstructured.Unstructured

// Desire registers the manifests of a generation's roles and returns the
// matching desired generation; roles after the first wait for the first.
func (c Catalog) Desire(generation string, roles []string, manifests map[string][]*unstructured.Unstructured) *handoff.Desired {
	d := &handoff.Desired{Generation: generation}
	c[generation] = manifests
	for i, r := range roles {
		role := handoff.Role{Name: r}
		if i > 0 {
			role.After = []string{roles[0]}
		}
		for _, m := range manifests[r] {
			role.Resources = append(role.Resources, handoff.RefOf(m))
		}
		d.Roles = append(d.Roles, role)
	}
	return d
}

// DesireHashed is [Catalog.Desire] with each role's Hash set to the
// [ContentHash] of its manifests, as tektoncd/operator sets
// operator.tekton.dev/last-applied-hash. Registering a generation again
// with changed manifests then changes the hash of the roles that changed,
// and the executor updates their sets in place (same name and UID, a new
// spec) instead of leaving them as they are.
func (c Catalog) DesireHashed(generation string, roles []string, manifests map[string][]*unstructured.Unstructured) *handoff.Desired {
	d := c.Desire(generation, roles, manifests)
	for i := range d.Roles {
		d.Roles[i].Hash = ContentHash(manifests[d.Roles[i].Name])
	}
	return d
}

// ContentHash returns a hash of manifests, in order: the hex SHA-256 of
// their JSON encoding, cut to 16 characters. Equal manifests give equal
// hashes whatever the order of their fields.
func ContentHash(manifests []*unstructured.Unstructured) string {
	objs := make([]map[string]any, 0, len(manifests))
	for _, m := range manifests {
		objs = append(objs, m.Object)
	}
	data, err := json.Marshal(objs)
	if err != nil {
		// Not JSON-encodable (a func or channel in an object): no fixture
		// holds that; hash what can be printed instead.
		data = fmt.Appendf(nil, "%v", objs)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// Build makes the set of a role of a registered generation, listing the
// role's manifests in spec.manifests as tektoncd/operator's sets do. It
// implements [handoff.BuildFunc].
func (c Catalog) Build(_ context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
	ms, ok := c[d.Generation][r.Name]
	if !ok {
		return nil, fmt.Errorf("no manifests for %s/%s", d.Generation, r.Name)
	}
	items := make([]any, 0, len(ms))
	for _, m := range ms {
		items = append(items, m.DeepCopy().Object)
	}
	return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"manifests": items}}}, nil
}

// Round is one reconcile of the executor followed by one of the set
// controller.
func (w *World) Round(ctx context.Context, desired *handoff.Desired) (handoff.Result, error) {
	res, err := w.Executor.Step(ctx, desired)
	if w.Plans != nil && res.Plan.Phase != "" {
		fmt.Fprint(w.Plans, res.Plan)
	}
	cerr := w.Controller.Reconcile(ctx)
	return res, errors.Join(err, cerr)
}

// Converge runs rounds until the executor's plan is settled and the
// controller has nothing left to do, checking I5 with a [Gate] from the
// first round on. Errors of single rounds (injected faults) are retried;
// it fails after max rounds.
func (w *World) Converge(ctx context.Context, desired *handoff.Desired, max int) (rounds int, err error) {
	var gate Gate
	if desired != nil {
		// The state before the first round, so that the first round is
		// checked too.
		if err := gate.Observe(w.Cluster, w.Family, *desired); err != nil {
			return 0, err
		}
	}
	var last error
	for rounds = 1; rounds <= max; rounds++ {
		res, err := w.Round(ctx, desired)
		if desired != nil {
			if gerr := gate.Observe(w.Cluster, w.Family, *desired); gerr != nil {
				return rounds, gerr
			}
		}
		if err != nil {
			last = err
			continue
		}
		if !res.Requeue {
			return rounds, nil
		}
	}
	return rounds, fmt.Errorf("not converged after %d rounds: %w", max, last)
}

// ConvergeLegacy upgrades the way tektoncd/operator does today: it deletes
// every main set of the family with Foreground propagation, lets the
// controller's finalizer delete every listed resource by name, and creates
// the new sets only once the old ones are gone.
func (w *World) ConvergeLegacy(ctx context.Context, desired *handoff.Desired, max int) (rounds int, err error) {
	w.Controller.Legacy = true
	defer func() { w.Controller.Legacy = false }()
	sets := w.Cluster.ClientFor("executor").Resource(SetResource)
	list, err := sets.List(ctx, metav1.ListOptions{LabelSelector: w.Family.LabelSelector().String()})
	if err != nil {
		return 0, err
	}
	fg := metav1.DeletePropagationForeground
	for _, s := range list.Items {
		if s.GetLabels()[w.Family.GenerationLabel] == desired.Generation {
			continue
		}
		if err := sets.Delete(ctx, s.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			return 0, err
		}
	}
	for rounds = 1; rounds <= max; rounds++ {
		if err := w.Controller.Reconcile(ctx); err != nil {
			return rounds, err
		}
		list, err := sets.List(ctx, metav1.ListOptions{LabelSelector: w.Family.LabelSelector().String()})
		if err != nil {
			return rounds, err
		}
		old := 0
		for _, s := range list.Items {
			if s.GetLabels()[w.Family.GenerationLabel] != desired.Generation {
				old++
			}
		}
		if old == 0 {
			n, err := w.Converge(ctx, desired, max)
			return rounds + n, err
		}
	}
	return rounds, fmt.Errorf("old sets not gone after %d rounds", max)
}
