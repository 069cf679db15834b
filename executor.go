package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// SetClient is what the executor needs of the set kind's API: a subset of
// [dynamic.ResourceInterface] with the same signatures, so
// dynamic.Interface.Resource(gvr) satisfies it, and a typed client can be
// adapted to it in a few lines.
type SetClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions, subresources ...string) error
}

var _ SetClient = dynamic.ResourceInterface(nil)

// BuildFunc builds the set of one role of the desired generation, as the
// operator builds its sets today (tektoncd/operator: makeInstallerSet). The
// executor then sets the name and adds only the family's labels, the role
// label and the hash annotation.
type BuildFunc func(ctx context.Context, desired Desired, role Role) (*unstructured.Unstructured, error)

// Executor carries out plans against a cluster. It is the only part of the
// library that talks to the API server. It holds no state between calls and
// is safe for concurrent use.
type Executor struct {
	// Family names the set kind and selects the component's sets.
	Family Family
	// Sets reads and writes sets; nil means Dynamic.Resource(Family.Resource).
	Sets SetClient
	// Dynamic and Mapper reach the resources sets list, for the ownership
	// handover before a retirement and for [Executor.Finalize].
	Dynamic dynamic.Interface
	// Mapper maps a listed resource's kind to its REST resource and scope.
	Mapper meta.RESTMapper
	// Build makes a desired set; required for Create and Update.
	Build BuildFunc
	// RoleOrder orders retirement on a removal (see [Planner.RoleOrder]).
	RoleOrder []string
	// Prune says what finalizing may delete; the zero value is used as it
	// is, so callers normally start from [DefaultPruneOptions].
	Prune PruneOptions
	// Propagation is the policy for deleting sets; empty means Foreground:
	// the set stays visible, deleting, until the garbage collector removed
	// the resources it still owns, so "the set is gone" means "its obsolete
	// resources are gone". Shared resources are handed over before the
	// delete, so Background is equally safe.
	Propagation metav1.DeletionPropagation
	// ResourcePropagation is the policy [Executor.Finalize] deletes obsolete
	// resources with; empty means Background: the resource goes at once and
	// the garbage collector removes its dependents (a Deployment's
	// ReplicaSets and Pods), as kubectl delete does.
	ResourcePropagation metav1.DeletionPropagation
	// DryRun plans and reads but writes nothing; the result lists the
	// writes it would have made.
	DryRun bool
	// Log receives one line per write; the zero value discards.
	Log logr.Logger
}

// Call is one write the executor made, or would make in a dry run.
type Call struct {
	// Verb is create, update, patch or delete.
	Verb string
	// Resource is the REST resource written, e.g. tektoninstallersets.
	Resource string
	// Name of the object written.
	Name string
	// Namespace of the object; empty for sets and cluster-scoped objects.
	Namespace string
}

// String renders the call for a log line.
func (c Call) String() string {
	if c.Namespace != "" {
		return fmt.Sprintf("%s %s %s/%s", c.Verb, c.Resource, c.Namespace, c.Name)
	}
	return fmt.Sprintf("%s %s %s", c.Verb, c.Resource, c.Name)
}

// Result is what one [Executor.Step] did.
type Result struct {
	// Plan is the plan this step computed from the listed sets.
	Plan Plan
	// Writes are the writes made (or, in a dry run, that would be made).
	Writes []Call
	// Requeue is true until the plan is settled: the caller reconciles
	// again later (the library never sleeps).
	Requeue bool
	// Waiting holds the plan's wait actions, which say why it requeues.
	Waiting []Action
}

func (e *Executor) sets() SetClient {
	if e.Sets != nil {
		return e.Sets
	}
	return e.Dynamic.Resource(e.Family.Resource)
}

// observe lists the family with one List call.
func (e *Executor) observe(ctx context.Context) ([]Set, error) {
	if err := e.Family.Validate(); err != nil {
		return nil, err
	}
	if e.Sets == nil && e.Dynamic == nil {
		return nil, fmt.Errorf("%w: executor has neither Sets nor Dynamic", ErrInvalidFamily)
	}
	list, err := e.sets().List(ctx, metav1.ListOptions{LabelSelector: e.Family.LabelSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("list %s with %s: %w", e.Family.Resource.Resource, e.Family.LabelSelector(), err)
	}
	return e.Family.ObserveAll(list.Items)
}

// Step runs one reconcile: it lists the family, plans, and carries out the
// plan's writes in order. desired nil removes the component. It stops at the
// first failed write and returns the error; the next Step plans again from
// what is on the cluster, so an interrupted Step is simply resumed.
func (e *Executor) Step(ctx context.Context, desired *Desired) (Result, error) {
	sets, err := e.observe(ctx)
	if err != nil {
		return Result{}, err
	}
	plan, err := Planner{Family: e.Family, RoleOrder: e.RoleOrder}.Plan(sets, desired)
	if err != nil {
		return Result{}, err
	}
	res := Result{Plan: plan, Requeue: !plan.Settled(), Waiting: plan.Of(ActionWait)}
	byUID := make(map[types.UID]Set, len(sets))
	for _, s := range sets {
		byUID[s.UID] = s
	}
	for _, a := range plan.Actions {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var err error
		switch a.Kind {
		case ActionSupersede:
			err = e.mark(ctx, &res, a, desired.Generation)
		case ActionRelease:
			err = e.mark(ctx, &res, a, "")
		case ActionCreate:
			err = e.create(ctx, &res, *desired, roleNamed(desired, a.Role))
		case ActionUpdate:
			err = e.update(ctx, &res, *desired, roleNamed(desired, a.Role), byUID[a.UID])
		case ActionRetire:
			err = e.retire(ctx, &res, byUID[a.UID], sets)
		}
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func roleNamed(d *Desired, name string) Role {
	for _, r := range d.Roles {
		if r.Name == name {
			return r
		}
	}
	return Role{Name: name}
}

func (e *Executor) record(res *Result, c Call) {
	res.Writes = append(res.Writes, c)
	if e.Log.GetSink() != nil {
		e.Log.Info("handoff write", "call", c.String(), "dryRun", e.DryRun)
	}
}

// mark sets (gen non-empty) or removes the superseded annotation. The UID in
// the patch makes it fail rather than touch a re-created set of that name.
func (e *Executor) mark(ctx context.Context, res *Result, a Action, gen string) error {
	var val any
	if gen != "" {
		val = gen
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         a.UID,
		"annotations": map[string]any{e.Family.supersededAnnotation(): val},
	}})
	if err != nil {
		return err
	}
	e.record(res, Call{Verb: "patch", Resource: e.Family.Resource.Resource, Name: a.Set})
	if e.DryRun {
		return nil
	}
	_, err = e.sets().Patch(ctx, a.Set, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return &SetError{Name: a.Set, Err: fmt.Errorf("mark superseded by %q: %w", gen, err)}
	}
	return nil
}

// build makes the desired set of a role with the family's labels.
func (e *Executor) build(ctx context.Context, d Desired, r Role) (*unstructured.Unstructured, error) {
	name := e.Family.SetName(d.Generation, r.Name)
	if e.Build == nil {
		return nil, &SetError{Name: name, Err: fmt.Errorf("%w: executor has no Build function", ErrInvalidFamily)}
	}
	obj, err := e.Build(ctx, d, r)
	if err != nil {
		return nil, &SetError{Name: name, Err: fmt.Errorf("build role %s of generation %s: %w", r.Name, d.Generation, err)}
	}
	obj = obj.DeepCopy()
	if obj.GetKind() == "" {
		obj.SetAPIVersion(e.Family.Resource.GroupVersion().String())
		obj.SetKind(e.Family.Kind)
	}
	obj.SetName(name)
	obj.SetGenerateName("")
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	want := maps.Clone(e.Family.Selector)
	want[e.Family.GenerationLabel] = d.Generation
	want[e.Family.roleLabel()] = r.Name
	for k, v := range want {
		if old, ok := lbls[k]; ok && old != v {
			return nil, &SetError{Name: name, Err: fmt.Errorf("%w: Build set label %s=%q, the family needs %q", ErrInvalidSet, k, old, v)}
		}
		lbls[k] = v
	}
	obj.SetLabels(lbls)
	if e.Family.HashAnnotation != "" && r.Hash != "" {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[e.Family.HashAnnotation] = r.Hash
		obj.SetAnnotations(ann)
	}
	return obj, nil
}

func (e *Executor) create(ctx context.Context, res *Result, d Desired, r Role) error {
	obj, err := e.build(ctx, d, r)
	if err != nil {
		return err
	}
	e.record(res, Call{Verb: "create", Resource: e.Family.Resource.Resource, Name: obj.GetName()})
	if e.DryRun {
		return nil
	}
	_, err = e.sets().Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return &SetError{Name: obj.GetName(), Err: fmt.Errorf("create: %w", err)}
		}
		return nil
	}
	// A retried create after a lost response: adopt the set if it is ours.
	live, err := e.sets().Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return &SetError{Name: obj.GetName(), Err: fmt.Errorf("get after AlreadyExists: %w", err)}
	}
	s, err := e.Family.Observe(live)
	if err != nil || s.Generation != d.Generation || s.Role != r.Name || s.Deleting {
		return &SetError{Name: obj.GetName(), Err: fmt.Errorf("%w: not the live set of %s/%s", ErrNameTaken, d.Generation, r.Name)}
	}
	return nil
}

func (e *Executor) update(ctx context.Context, res *Result, d Desired, r Role, cur Set) error {
	want, err := e.build(ctx, d, r)
	if err != nil {
		return err
	}
	e.record(res, Call{Verb: "update", Resource: e.Family.Resource.Resource, Name: cur.Name})
	if e.DryRun {
		return nil
	}
	first := true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := cur.Object
		if !first || live == nil {
			var err error
			if live, err = e.sets().Get(ctx, cur.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		if live.GetUID() != cur.UID {
			return fmt.Errorf("%w: UID is %s, planned for %s", ErrNameTaken, live.GetUID(), cur.UID)
		}
		next := live.DeepCopy()
		next.Object["spec"] = want.Object["spec"]
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
		_, err := e.sets().Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return &SetError{Name: cur.Name, Err: fmt.Errorf("update in place: %w", err)}
	}
	return nil
}

// retire hands the retiring set's shared resources to their successors and
// then deletes exactly that set, by name and UID.
func (e *Executor) retire(ctx context.Context, res *Result, s Set, family []Set) error {
	d := Finalization(s, family, e.Prune)
	if err := e.handover(ctx, res, s, d); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("retire: hand over shared resources: %w", err)}
	}
	policy := e.Propagation
	if policy == "" {
		policy = metav1.DeletePropagationForeground
	}
	e.record(res, Call{Verb: "delete", Resource: e.Family.Resource.Resource, Name: s.Name})
	if e.DryRun {
		return nil
	}
	uid := s.UID
	err := e.sets().Delete(ctx, s.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &policy,
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// The UID precondition failed: the name now holds another object,
		// which this plan did not name. Leave it alone.
		return nil
	}
	return &SetError{Name: s.Name, Err: fmt.Errorf("retire: %w", err)}
}

// handover moves ownership of every kept resource that still names the
// retiring set to the successor that lists it.
func (e *Executor) handover(ctx context.Context, res *Result, retiring Set, d Decision) error {
	var errs []error
	for _, it := range d.Of(Keep) {
		if err := e.handoverOne(ctx, res, retiring, it); err != nil {
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
		}
	}
	return errors.Join(errs...)
}

func (e *Executor) resource(r Ref) (dynamic.ResourceInterface, string, error) {
	if e.Dynamic == nil || e.Mapper == nil {
		return nil, "", fmt.Errorf("%w: executor needs Dynamic and Mapper to reach resources", ErrInvalidFamily)
	}
	m, err := e.Mapper.RESTMapping(schema.GroupKind{Group: r.Group, Kind: r.Kind})
	if err != nil {
		return nil, "", err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.Dynamic.Resource(m.Resource).Namespace(r.Namespace), m.Resource.Resource, nil
	}
	return e.Dynamic.Resource(m.Resource), m.Resource.Resource, nil
}

func (e *Executor) handoverOne(ctx context.Context, res *Result, retiring Set, it Item) error {
	client, resource, err := e.resource(it.Ref)
	if meta.IsNoMatchError(err) {
		return nil // the kind is not served: no object to hand over
	}
	if err != nil {
		return err
	}
	to := e.Family.OwnerReference(Set{Name: it.Successor, UID: it.SuccessorUID})
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := client.Get(ctx, it.Ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		refs := live.GetOwnerReferences()
		if !ownedBy(refs, retiring.UID) {
			return nil
		}
		next, _ := Handover(refs, retiring.UID, to)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": live.GetResourceVersion(),
			"ownerReferences": next,
		}})
		if err != nil {
			return err
		}
		e.record(res, Call{Verb: "patch", Resource: resource, Namespace: it.Ref.Namespace, Name: it.Ref.Name})
		if e.DryRun {
			return nil
		}
		_, err = client.Patch(ctx, it.Ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}
