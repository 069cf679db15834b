package handoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
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

// SetMetadataClient reads the metadata of the set kind's objects alone: a
// subset of client-go's metadata.ResourceInterface, so
// metadata.Interface.Resource(gvr) (and its Namespace(ns)) satisfies it.
type SetMetadataClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*metav1.PartialObjectMetadata, error)
}

var _ SetMetadataClient = metadata.ResourceInterface(nil)

// SetLister lists sets from a cache. client-go's dynamiclister.Lister, over
// a dynamic informer of the set resource, implements it; an operator's
// typed lister is adapted in a few lines. The objects it returns are never
// modified.
type SetLister interface {
	List(selector labels.Selector) ([]*unstructured.Unstructured, error)
}

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
	// Sets reads and writes sets; nil means Dynamic.Resource(Family.Resource),
	// in Family.Namespace when the set kind is namespaced.
	Sets SetClient
	// Cache, if set, is where Step reads the family from (an informer's
	// lister), so a steady-state reconcile makes no API call. A cache can
	// lag, so a Step whose plan retires or creates a set confirms it first:
	// it lists the family from the API server and plans again from that,
	// and only that plan is carried out. Updates and marks need no
	// confirmation: UIDs and resourceVersions keep them safe.
	// Finalize always reads from the API server. With [Executor.Metadata]
	// the confirmation lists the family's metadata alone, and keeps the
	// plan made from the cache when every set's UID and resourceVersion
	// are those the cache holds (the same objects, byte for byte); only
	// otherwise does it list the sets whole.
	Cache SetLister
	// Metadata, if set, reads metadata alone where the executor decides
	// from nothing else (client-go's metadata.NewForConfig asks for
	// PartialObjectMetadata, as protobuf, so the server neither sends nor
	// the client decodes what sets and resources hold): the confirmation
	// of a plan made from Cache, through SetsMetadata, and, where Objects
	// is nil (or made by [NewDynamicObjects]), the Lists of the resources
	// a retirement hands over and Finalize deletes. What an [ObjectProbe]
	// reads is always read whole.
	Metadata metadata.Interface
	// SetsMetadata reads the sets' metadata; nil means
	// Metadata.Resource(Family.Resource) (in Family.Namespace when the
	// set kind is namespaced) when Sets is nil too. An executor given a
	// namespaced Sets sets it to the same namespace.
	SetsMetadata SetMetadataClient
	// Objects reaches the resources sets list, for the ownership handover
	// before a retirement and for [Executor.Finalize]; nil means
	// [NewDynamicObjects] over Dynamic and Mapper, made anew for each call.
	Objects Objects
	// Dynamic and Mapper reach the resources sets list when Objects is nil.
	Dynamic dynamic.Interface
	// Mapper maps a listed resource's kind to its REST resource and scope.
	// It also tells which listed kinds are cluster-scoped when
	// Family.ClusterScoped is nil. A [meta.ResettableRESTMapper] (client-go's
	// DeferredDiscoveryRESTMapper) is reset once per call on a kind it does
	// not know; a mapper that cannot be reset makes such a kind an
	// [ErrStaleMapper] error that stops the retirement.
	Mapper meta.RESTMapper
	// Discovery, if set, proves a kind not served before anything relies
	// on it: a kind the mapper does not know after a reset is not served
	// only when its group is not served, or was discovered whole without
	// it. A group whose discovery fails (an aggregated API that is down)
	// makes its kinds unknown: nothing listed in them is handed over,
	// deleted or reported gone, the call fails with a [*DiscoveryError],
	// and [Reads.Undiscovered] names the group. Without it, the mapper's
	// answer after a reset is taken as it is (client-go's
	// DeferredDiscoveryRESTMapper drops a group whose discovery failed).
	Discovery discovery.DiscoveryInterface
	// Build makes a desired set, for a Step whose [Desired] has no Build
	// of its own; one of the two is required by a Step with a desired
	// generation (which creates and updates sets), neither by a removal
	// (Step with nil) or Finalize. See [Executor.Validate].
	Build BuildFunc
	// RoleOrder orders retirement on a removal (see [Planner.RoleOrder]).
	RoleOrder []string
	// Prune says what finalizing may delete; the zero value is used as it
	// is, so callers normally start from [DefaultPruneOptions].
	Prune PruneOptions
	// Propagation is the policy for deleting sets; empty means Background.
	// Shared resources are handed over, and kept ones released, before the
	// delete; with Background the set's finalizer ([Executor.Finalize])
	// then runs before the garbage collector touches anything the set
	// owns, which also covers what a set controller's pass in flight gave
	// the set after that handover. Foreground lets the garbage collector
	// delete the set's dependents at once, before its finalizer runs: an
	// object such a pass created for the set (a PVC, a keep-annotated one)
	// would be lost.
	Propagation metav1.DeletionPropagation
	// ResourcePropagation is the policy [Executor.Finalize] deletes obsolete
	// resources with; empty means Background: the resource goes at once and
	// the garbage collector removes its dependents (a Deployment's
	// ReplicaSets and Pods), as kubectl delete does.
	ResourcePropagation metav1.DeletionPropagation
	// StepTimeout, if set, bounds the time a Step spends: when it runs out
	// the Step stops before its next call (so it returns at most one
	// call's time late, the client's rate limiter wait included), with
	// [Result.Interrupted] and Requeue set and no error. Everything it did
	// stays done and is not redone: the next Step plans from the cluster.
	// A context deadline, by contrast, fails the call in flight.
	StepTimeout time.Duration
	// Recorder, if set with Component, receives Kubernetes Events on
	// Component (the operator's component object): sets created, waits,
	// retirements, finalizations, failures. client-go's
	// record.EventRecorder satisfies it.
	Recorder  EventRecorder
	Component runtime.Object
	// Metrics, if set, receives API calls by verb, objects pruned and
	// kept, handoff durations and wait times (see [MetricAPICalls] and the
	// names beside it).
	Metrics Metrics
	// Concurrency is how many set writes of one kind a Step may have under
	// way at once: the marks of the sets it supersedes or releases, the
	// creates of a role's sets, the deletes of the sets it retires, each a
	// write of a whole set (hundreds of kilobytes for a large release) the
	// API server handles on its own. 0 or 1 writes one at a time in plan
	// order, stopping at the first failure. Above 1, a run of writes of one
	// kind goes out together, at most Concurrency at a time, and the Step
	// stops after all of them returned, with their errors joined;
	// everything before them (a retirement's handover) is still done in
	// order, one set at a time, and resource writes are never concurrent.
	// Sets, if set, must then be safe for concurrent use. Under a client
	// rate limiter the writes still wait for it.
	Concurrency int
	// DryRun plans and reads but writes nothing; the result lists the
	// writes it would have made, in order: those of the sets' finalization
	// that the Step makes itself (a set retired with no finalizer: the
	// deletes of what only it listed, the removal of [ExecutorFinalizer])
	// included, not those a set controller's finalizer makes later.
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
	// Family is the family's sets as this Step left them: as listed (from
	// the API server, or from Cache), with the Step's own writes in — the
	// sets it created, updated or marked as they were written, those it
	// deleted still there with Deleting set — and the invalid ones as
	// they were read. Package inventory's Stamp takes it, so the apply
	// that follows a Step needs no List of its own. Empty when the Step
	// failed before it had listed the family.
	Family []Set
	// Writes are the writes made (or, in a dry run, that would be made).
	Writes []Call
	// Requeue is true until the plan is settled: the caller reconciles
	// again later (the library never sleeps).
	Requeue bool
	// Waiting holds the plan's wait actions, which say why it requeues.
	Waiting []Action
	// Invalid holds the sets of the family that could not be read whole
	// (see [Set.Invalid]). They are left out of the plan, never retired,
	// and count as listers of what they could be read to list; Step
	// carries out the plan for the rest and returns their errors.
	Invalid []Set
	// Confirmed is true when the plan made from [Executor.Cache] retired or
	// created a set, or settled a removal, so the Step listed the family
	// from the API server and planned again; Plan is then the confirmed
	// plan.
	Confirmed bool
	// Deleted, Collected, HandedOver, Kept and Skipped say what the
	// Step's retirements did with the resources the retired sets list,
	// as [FinalizeResult]'s fields of the same names do, each resource
	// once per set retired. A retirement hands over what a live set
	// lists (HandedOver, or Kept when no write was needed) and releases
	// protected and keep-annotated resources (Skipped, Detached). What no
	// live set lists is decided when the set is finalized: by the Step
	// itself for a set without a finalizer of its own (an inventory set),
	// which lands in Deleted, Collected or Skipped with the reason it was
	// left (owned by an object outside the family, no owner and a kind
	// not installed without one, listed by another family), and otherwise
	// by the set's finalizer, whose FinalizeResult reports it.
	Deleted    []Item
	Collected  []Item
	HandedOver []Item
	Kept       []Item
	Skipped    []Item
	// Unserved holds the resources of the sets retired whose kind is not
	// served, established by a fresh discovery: nothing was handed over or
	// released for them, as no object of them can exist. A resource a
	// live set lists is never skipped so: that stops the retirement with
	// an error wrapping [ErrNotServed].
	Unserved []Item
	// Reads says how the Step read the resources of the sets it retired:
	// Lists and Gets, and the scopes it had to read with Gets.
	Reads Reads
	// Interrupted is true when the Step stopped because its
	// [Executor.StepTimeout] ran out; Requeue is then true, and the next
	// Step goes on from what this one did.
	Interrupted bool
}

func (e *Executor) sets() SetClient {
	if e.Sets != nil {
		return e.Sets
	}
	if e.Family.Namespaced {
		return e.Dynamic.Resource(e.Family.Resource).Namespace(e.Family.Namespace)
	}
	return e.Dynamic.Resource(e.Family.Resource)
}

// setsMetadata returns the client of the sets' metadata; nil when there is
// none.
func (e *Executor) setsMetadata() SetMetadataClient {
	switch {
	case e.SetsMetadata != nil:
		return e.SetsMetadata
	case e.Sets == nil && e.Metadata != nil && e.Family.Namespaced:
		return e.Metadata.Resource(e.Family.Resource).Namespace(e.Family.Namespace)
	case e.Sets == nil && e.Metadata != nil:
		return e.Metadata.Resource(e.Family.Resource)
	}
	return nil
}

// run is one call of Step or Finalize: the family as the call sees it, kept
// current as the call's own writes land, and the way to the resources.
type run struct {
	e        *Executor
	family   Family
	objects  Objects
	view     []Set       // the family, as listed and then as written by this call
	retiring []types.UID // the sets this call retires or finalizes
	// recordOnly: a Record, which carries out no retirement, finalize or
	// prune
	recordOnly bool
	decider    *decider // over view, for retire; nil until needed or when stale
	writes     []Call
	unserved   []Item // items skipped because their kind is not served
	// strangers are the live sets of the set kind outside the family, read
	// once per call on the first delete (see foreign); byRef indexes what
	// they list.
	strangers     []Set
	byRef         map[Ref]int
	strangersRead bool
	live          liveState // what the call read of listed resources
	staying       types.UID // the set prune works for: it does not go, so the garbage collector takes nothing of it
	setReads      struct{ lists, gets int }
	cached        map[types.UID]string // the resourceVersions of the sets the cache gave the view
	keptCount     int                  // resources handed over or released by retirements
	retired       Result               // what retirements did: its Deleted, Collected, HandedOver, Kept and Skipped
	detached      map[retiredRef]bool  // resources a retirement released before the Step finalized their set
	deadline      time.Time            // from StepTimeout; zero: none
	// last is the work a Step does once every other delete is done: the
	// RBAC deletes and what follows them (see deletedLast).
	last []func(context.Context) error
}

// errOutOfTime stops a Step whose [Executor.StepTimeout] ran out.
var errOutOfTime = errors.New("step timeout reached")

// outOfTime reports whether the call's StepTimeout has run out.
func (r *run) outOfTime() bool { return !r.deadline.IsZero() && !time.Now().Before(r.deadline) }

// start validates the executor (with Build when build is true) and
// begins a call: nothing is read or written before it returns.
func (e *Executor) start(build bool) (*run, error) {
	if err := e.validate(build); err != nil {
		return nil, err
	}
	r := &run{e: e, family: e.Family, objects: e.Objects}
	var res *resolver
	if e.Mapper != nil {
		res = newResolver(e.Mapper)
		res.disco = e.Discovery
		if r.family.ClusterScoped == nil {
			r.family.ClusterScoped = res.clusterScoped()
		}
	}
	switch o := r.objects.(type) {
	case nil:
		if e.Dynamic != nil && res != nil {
			r.objects = &dynamicObjects{client: e.Dynamic, mapper: e.Mapper, meta: e.Metadata, res: res}
		}
	case callScoped:
		r.objects = o.forCall(e.Discovery, e.Metadata)
	}
	return r, nil
}

func (r *run) record(c Call) {
	r.writes = append(r.writes, c)
	if r.e.Log.GetSink() != nil {
		r.e.Log.Info("handoff write", "call", c.String(), "dryRun", r.e.DryRun)
	}
}

// Step runs one reconcile: it lists the family, plans, and carries out the
// plan's writes in order. desired nil removes the component. It stops at the
// first failed write and returns the error; the next Step plans again from
// what is on the cluster, so an interrupted Step is simply resumed. (With
// [Executor.Concurrency] above 1, set writes of one kind go out together
// and the Step stops once all of them have returned.)
//
// Each write updates the family as the rest of the Step sees it: a set
// retired earlier in the Step is no successor of a later one, and a set
// released earlier is no longer superseded.
//
// Sets of the family that cannot be read whole are reported in
// [Result.Invalid] and their errors returned, after the plan for the other
// sets has been carried out.
//
// With [Executor.Cache] the family is read from the cache, and a plan that
// retires or creates anything is made again from a List on the API server
// before any of it is carried out.
//
// A misconfigured executor ([Executor.Validate], and Build when desired is
// not nil) fails with a [*ConfigError] before any read or write.
func (e *Executor) Step(ctx context.Context, desired *Desired) (Result, error) {
	r, err := e.start(desired != nil && desired.Build == nil)
	if err != nil {
		return Result{}, err
	}
	res, plan, err := r.step(ctx, desired)
	gen := ""
	if desired != nil {
		gen = desired.Generation
	}
	r.reportStep(plan, gen, res, err)
	return res, err
}

func (r *run) step(ctx context.Context, desired *Desired) (Result, Plan, error) {
	if r.e.StepTimeout > 0 {
		r.deadline = time.Now().Add(r.e.StepTimeout)
	}
	var err error
	fromCache := r.e.Cache != nil
	if fromCache {
		err = r.observeCache()
	} else {
		err = r.observe(ctx)
	}
	if err == nil {
		err = r.probeObjects(ctx)
	}
	if err != nil {
		return Result{}, Plan{}, err
	}
	res, plan, err := r.plan(desired)
	retires := func(p Plan) bool { return !r.recordOnly && len(p.Of(ActionRetire)) > 0 }
	if err == nil && fromCache && (retires(plan) || len(plan.Of(ActionCreate)) > 0 || desired == nil && plan.Settled()) {
		// Never retire or create from a cache: confirm on the API server.
		// (A create by the deterministic name cannot duplicate a set the
		// executor made, but it can one made before, with GenerateName,
		// that the cache does not show yet.) Nor say a removal is done:
		// the caller then drops its own finalizer, and a set the cache
		// does not show yet would stay behind with all it lists.
		same, cerr := r.cacheCurrent(ctx)
		if cerr != nil {
			return Result{}, Plan{}, cerr
		}
		if !same {
			if err := r.observe(ctx); err != nil {
				return Result{}, Plan{}, err
			}
			if err := r.probeObjects(ctx); err != nil {
				return Result{}, Plan{}, err
			}
			res, plan, err = r.plan(desired)
		}
		res.Confirmed = true
	}
	if err != nil {
		return res, plan, err
	}
	invalid := res.invalid()
	if r.recordOnly {
		plan = recording(plan)
	}
	err = r.carryOut(ctx, plan, desired)
	res.Writes, res.Unserved, res.Reads = r.writes, uniqueItems(r.unserved), r.live.reads
	res.Family = slices.Clone(r.view)
	res.Deleted, res.Collected, res.HandedOver, res.Kept, res.Skipped = r.retired.Deleted, r.retired.Collected, r.retired.HandedOver, r.retired.Kept, r.retired.Skipped
	if errors.Is(err, errOutOfTime) {
		// What was done stays done: the next Step plans again from the
		// cluster and goes on from there.
		res.Requeue, res.Interrupted, err = true, true, nil
	}
	return res, plan, errors.Join(err, invalid)
}

func (r *run) carryOut(ctx context.Context, plan Plan, desired *Desired) error {
	for _, a := range plan.Actions {
		if a.Kind == ActionRetire || a.Kind == ActionFinalize {
			r.retiring = append(r.retiring, a.UID)
		}
	}
	for i := 0; i < len(plan.Actions); {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.outOfTime() {
			return errOutOfTime
		}
		a := plan.Actions[i]
		if n := r.batchable(plan.Actions[i:]); n > 1 {
			if err := r.batch(ctx, plan.Actions[i:i+n], desired); err != nil {
				return err
			}
			i += n
			continue
		}
		var err error
		switch a.Kind {
		case ActionSupersede:
			err = r.mark(ctx, a, desired.Generation)
		case ActionRelease:
			err = r.mark(ctx, a, "")
		case ActionCreate:
			err = r.create(ctx, *desired, roleNamed(desired, a.Role))
		case ActionUpdate:
			s, _ := r.set(a.UID)
			err = r.update(ctx, *desired, roleNamed(desired, a.Role), *s)
		case ActionRetire:
			err = r.retire(ctx, a.UID)
		case ActionFinalize:
			err = r.finish(ctx, a.UID)
		case ActionPrune:
			err = r.prune(ctx, a.UID)
		}
		if err != nil {
			return err
		}
		i++
	}
	// Once everything else succeeded: what any of them failed to delete
	// may need the rights the RBAC objects give.
	var errs []error
	for _, f := range r.last {
		if err := f(ctx); errors.Is(err, errOutOfTime) {
			return err
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
