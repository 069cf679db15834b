package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
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
	// Build makes a desired set; required by a Step with a desired
	// generation (which creates and updates sets), not by a removal (Step
	// with nil) or Finalize. See [Executor.Validate].
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
	decider  *decider    // over view, for retire; nil until needed or when stale
	writes   []Call
	unserved []Item // items skipped because their kind is not served
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

// observeCache reads the family from the executor's cache.
func (r *run) observeCache() error {
	fam := r.family
	objs, err := r.e.Cache.List(fam.LabelSelector())
	if err != nil {
		return fmt.Errorf("list %s with %s from the cache: %w", fam.Resource.Resource, fam.LabelSelector(), err)
	}
	items := make([]unstructured.Unstructured, len(objs))
	r.cached = make(map[types.UID]string, len(objs))
	for i, o := range objs {
		items[i] = *o
		r.cached[o.GetUID()] = o.GetResourceVersion()
	}
	r.view, _ = fam.ObserveAll(items)
	r.decider = nil
	return nil
}

// observe lists the family with one List call. Sets that cannot be read
// whole are in the view, with Set.Invalid.
func (r *run) observe(ctx context.Context) error {
	fam := r.family
	r.setReads.lists++
	list, err := r.e.sets().List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
	if err != nil {
		return fmt.Errorf("list %s with %s: %w", fam.Resource.Resource, fam.LabelSelector(), err)
	}
	r.view, _ = fam.ObserveAll(list.Items)
	r.decider = nil
	return nil
}

// cacheCurrent reports whether the API server holds exactly the sets the
// cache gave the view, each at the resourceVersion the cache holds: one
// List of the family's metadata alone. Without a client of the sets'
// metadata it reports false, and the caller lists the sets whole.
func (r *run) cacheCurrent(ctx context.Context) (bool, error) {
	md := r.e.setsMetadata()
	if md == nil {
		return false, nil
	}
	fam := r.family
	r.setReads.lists++
	list, err := md.List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
	if err != nil {
		return false, fmt.Errorf("list the metadata of %s with %s: %w", fam.Resource.Resource, fam.LabelSelector(), err)
	}
	if len(list.Items) != len(r.cached) {
		return false, nil
	}
	for _, it := range list.Items {
		if rv, ok := r.cached[it.UID]; !ok || rv != it.ResourceVersion {
			return false, nil
		}
	}
	return true, nil
}

// setNamed returns the view's set of a name, and whether there is one.
func (r *run) setNamed(name string) (Set, bool) {
	for _, s := range r.view {
		if s.Name == name && name != "" {
			return s, true
		}
	}
	return Set{}, false
}

// set returns the view's set with a UID, and whether there is one.
func (r *run) set(uid types.UID) (*Set, bool) {
	for i := range r.view {
		if r.view[i].UID == uid {
			return &r.view[i], true
		}
	}
	return nil, false
}

// saw puts a set as this call wrote it into the view.
func (r *run) saw(obj *unstructured.Unstructured) {
	if obj == nil {
		return
	}
	s, _ := r.family.Observe(obj)
	r.decider = nil
	if cur, ok := r.set(s.UID); ok {
		*cur = s
		return
	}
	r.view = append(r.view, s)
}

// decide returns the finalization decision of the view's set uid, one of
// r.retiring, from one index over the view built for all of them: sets
// retired earlier in the call are being deleted in the view, so they are
// nobody's successor.
func (r *run) decide(uid types.UID) Decision {
	d := r.deciderFor()
	i := slices.IndexFunc(r.view, func(s Set) bool { return s.UID == uid })
	return d.decide(i)
}

func (r *run) deciderFor() *decider {
	if r.decider == nil {
		var idx []int
		for i, s := range r.view {
			if slices.Contains(r.retiring, s.UID) {
				idx = append(idx, i)
			}
		}
		r.decider = newDecider(r.view, idx, r.e.Prune)
	}
	return r.decider
}

// owners returns the ownerReferences a kept resource gets: its successor
// first, then every other set of the view that lists it, is not being
// deleted and is not retired by this call.
func (r *run) owners(it Item, retiring types.UID) []metav1.OwnerReference {
	d := r.deciderFor()
	i := slices.IndexFunc(r.view, func(s Set) bool { return s.UID == retiring })
	out := []metav1.OwnerReference{r.family.OwnerReference(Set{Name: it.Successor, UID: it.SuccessorUID})}
	if k, ok := d.slotOf(i, it.Ref); ok {
		d.listers(k, d.excluded(i), func(j int) bool {
			// Sets this call retires later are going anyway: naming them
			// only costs each a write more when its turn comes.
			if s := r.view[j]; s.UID != it.SuccessorUID && !slices.Contains(r.retiring, s.UID) {
				out = append(out, r.family.OwnerReference(s))
			}
			return true
		})
	}
	return out
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
	r, err := e.start(desired != nil)
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
	if err == nil && fromCache && (len(plan.Of(ActionRetire))+len(plan.Of(ActionCreate)) > 0 || desired == nil && plan.Settled()) {
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
	err = r.carryOut(ctx, plan, desired)
	res.Writes, res.Unserved, res.Reads = r.writes, uniqueItems(r.unserved), r.live.reads
	res.Deleted, res.Collected, res.HandedOver, res.Kept, res.Skipped = r.retired.Deleted, r.retired.Collected, r.retired.HandedOver, r.retired.Kept, r.retired.Skipped
	if errors.Is(err, errOutOfTime) {
		// What was done stays done: the next Step plans again from the
		// cluster and goes on from there.
		res.Requeue, res.Interrupted, err = true, true, nil
	}
	return res, plan, errors.Join(err, invalid)
}

// probeObjects gives each live set of the view whose family's probe is an
// [ObjectProbe] the readiness of the objects it lists: it reads those the
// probe selects (one List per kind and namespace, through prefetch, so the
// retirement that may follow reuses what it read) and asks the probe. A
// set being deleted or superseded keeps what Observe said of it.
func (r *run) probeObjects(ctx context.Context) error {
	probe, ok := r.family.Probe.(ObjectProbe)
	if !ok {
		return nil
	}
	probed := func(s Set) bool { return s.Invalid == nil && !s.Deleting && s.SupersededBy == "" }
	var refs []Ref
	for _, s := range r.view {
		if probed(s) {
			for _, ref := range s.Resources {
				if probe.Reads(ref) {
					refs = append(refs, ref)
				}
			}
		}
	}
	if len(refs) > 0 && r.objects == nil {
		return fmt.Errorf("%w: executor needs Objects, or Dynamic and Mapper, to read what an ObjectProbe decides from", ErrInvalidFamily)
	}
	if err := r.prefetch(ctx, refs, true); err != nil {
		return fmt.Errorf("read the objects the sets' readiness depends on: %w", err)
	}
	for i := range r.view {
		s := &r.view[i]
		if probed(*s) {
			s.Readiness = probe.ReadyFrom(*s, func(ref Ref) (*unstructured.Unstructured, error) {
				// (Never an object read with metadata alone.)
				return r.get(ctx, ref, r.live.partial[scopeOf(ref)])
			})
		}
	}
	return nil
}

// plan plans from the view, leaving out (and reporting) invalid sets.
func (r *run) plan(desired *Desired) (Result, Plan, error) {
	valid := make([]Set, 0, len(r.view))
	var res Result
	for _, s := range r.view {
		if s.Invalid != nil {
			res.Invalid = append(res.Invalid, s)
			continue
		}
		valid = append(valid, s)
	}
	plan, err := Planner{Family: r.family, RoleOrder: r.e.RoleOrder}.Plan(valid, desired)
	if err != nil {
		return res, plan, errors.Join(err, res.invalid())
	}
	res.Plan, res.Requeue, res.Waiting = plan, !plan.Settled(), plan.Of(ActionWait)
	return res, plan, nil
}

func (res Result) invalid() error {
	errs := make([]error, 0, len(res.Invalid))
	for _, s := range res.Invalid {
		errs = append(errs, s.Invalid)
	}
	return errors.Join(errs...)
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
	return nil
}

// batchable returns how many of actions, from the first, the Step may
// write together: with [Executor.Concurrency] above 1 and no dry run, a
// run of marks, creates or retirements of one kind. A retirement of a
// set without a finalizer is finalized by the Step itself right after
// its delete, so it ends a run (and is never in one).
func (r *run) batchable(actions []Action) int {
	if r.e.Concurrency <= 1 || r.e.DryRun {
		return 0
	}
	ok := func(a Action) bool {
		switch a.Kind {
		case ActionSupersede, ActionRelease, ActionCreate:
			return true
		case ActionRetire:
			s, found := r.set(a.UID)
			return found && !needsFinalizer(*s)
		}
		return false
	}
	n := 0
	for n < len(actions) && actions[n].Kind == actions[0].Kind && ok(actions[n]) {
		n++
	}
	return n
}

// A setWrite is one write of a batch: send makes the call (concurrently
// with the batch's others) and done takes its answer, in plan order.
type setWrite struct {
	send func(ctx context.Context) (*unstructured.Unstructured, error)
	done func(ctx context.Context, live *unstructured.Unstructured, err error) error
}

// batch carries out a run of actions of one kind (see batchable): what
// comes before each write is done in order; the writes then go out at
// most Concurrency at a time; their answers are taken in order. It
// returns every write's error, joined.
func (r *run) batch(ctx context.Context, actions []Action, desired *Desired) error {
	var writes []setWrite
	var prepErr error
	for _, a := range actions {
		var w *setWrite
		var err error
		switch a.Kind {
		case ActionSupersede:
			w, err = r.markWrite(a, desired.Generation)
		case ActionRelease:
			w, err = r.markWrite(a, "")
		case ActionCreate:
			w, err = r.createWrite(ctx, *desired, roleNamed(desired, a.Role))
		case ActionRetire:
			w, err = r.retireWrite(ctx, a.UID)
		}
		if err != nil {
			// As one at a time: nothing after a failure is tried; what
			// was made ready before it is still written.
			prepErr = err
			break
		}
		if w != nil {
			writes = append(writes, *w)
		}
	}
	type answer struct {
		live *unstructured.Unstructured
		err  error
	}
	answers := make([]answer, len(writes))
	sem := make(chan struct{}, r.e.Concurrency)
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			live, err := w.send(ctx)
			answers[i] = answer{live, err}
		}()
	}
	wg.Wait()
	var errs []error
	for i, w := range writes {
		if err := w.done(ctx, answers[i].live, answers[i].err); err != nil {
			errs = append(errs, err)
		}
	}
	if prepErr != nil && !errors.Is(prepErr, errOutOfTime) || len(errs) == 0 {
		errs = append(errs, prepErr)
	}
	// A write that failed is reported even when the Step ran out of time
	// before its next one: a Step out of time returns no error.
	return errors.Join(errs...)
}

func roleNamed(d *Desired, name string) Role {
	for _, r := range d.Roles {
		if r.Name == name {
			return r
		}
	}
	return Role{Name: name}
}

// mark sets (gen non-empty) or removes the superseded annotation. The UID in
// the patch makes it fail rather than touch a re-created set of that name.
func (r *run) mark(ctx context.Context, a Action, gen string) error {
	w, err := r.markWrite(a, gen)
	if err != nil || w == nil {
		return err
	}
	return w.run(ctx)
}

// run sends w and takes its answer.
func (w *setWrite) run(ctx context.Context) error {
	live, err := w.send(ctx)
	return w.done(ctx, live, err)
}

// markWrite is mark's patch, as a write; nil in a dry run.
func (r *run) markWrite(a Action, gen string) (*setWrite, error) {
	var val any
	if gen != "" {
		val = gen
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         a.UID,
		"annotations": map[string]any{r.family.supersededAnnotation(): val},
	}})
	if err != nil {
		return nil, err
	}
	r.record(Call{Verb: "patch", Resource: r.family.Resource.Resource, Name: a.Set})
	if r.e.DryRun {
		if s, ok := r.set(a.UID); ok {
			s.SupersededBy = gen
		}
		return nil, nil
	}
	send := func(ctx context.Context) (*unstructured.Unstructured, error) {
		return r.e.sets().Patch(ctx, a.Set, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	got := false // send read the set again (it runs beside a batch's others)
	if md, s := r.e.setsMetadata(), r.viewed(a.UID); md != nil && s != nil && s.GetGeneration() > 0 {
		// The answer is the set's metadata alone; its content is the one
		// read, unless the server counted a change of it since (a set
		// kind without a generation is patched whole).
		send = func(ctx context.Context) (*unstructured.Unstructured, error) {
			m, err := md.Patch(ctx, a.Set, types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				return nil, err
			}
			if m.Generation == s.GetGeneration() {
				return withMetadata(s, m)
			}
			got = true
			return r.e.sets().Get(ctx, a.Set, metav1.GetOptions{})
		}
	}
	return &setWrite{
		send: send,
		done: func(_ context.Context, live *unstructured.Unstructured, err error) error {
			if got {
				r.setReads.gets++
			}
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return &SetError{Name: a.Set, Err: fmt.Errorf("mark superseded by %q: %w", gen, err)}
			}
			r.saw(live)
			return nil
		},
	}, nil
}

// viewed returns the object of the view's set uid as read; nil when the
// view has no such set or it was not read whole.
func (r *run) viewed(uid types.UID) *unstructured.Unstructured {
	if s, ok := r.set(uid); ok && s.Invalid == nil {
		return s.Object
	}
	return nil
}

// withMetadata returns obj with the metadata of m and obj's content: what
// a write answered with metadata alone made of a set whose generation
// (the count of its content's changes) is the one read.
func withMetadata(obj *unstructured.Unstructured, m *metav1.PartialObjectMetadata) (*unstructured.Unstructured, error) {
	md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m.ObjectMeta)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	out.Object["metadata"] = md
	return out, nil
}

// build makes the desired set of a role with the family's labels.
func (r *run) build(ctx context.Context, d Desired, role Role) (*unstructured.Unstructured, error) {
	fam := r.family
	name := fam.SetName(d.Generation, role.Name)
	if r.e.Build == nil {
		return nil, &SetError{Name: name, Err: fmt.Errorf("%w: executor has no Build function", ErrInvalidFamily)}
	}
	obj, err := r.e.Build(ctx, d, role)
	if err != nil {
		return nil, &SetError{Name: name, Err: fmt.Errorf("build role %s of generation %s: %w", role.Name, d.Generation, err)}
	}
	obj = obj.DeepCopy()
	fam.typeMeta(obj)
	obj.SetName(name)
	obj.SetGenerateName("")
	if err := fam.label(obj, d.Generation, role.Name); err != nil {
		return nil, &SetError{Name: name, Err: err}
	}
	if fam.HashAnnotation != "" && role.Hash != "" {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[fam.HashAnnotation] = role.Hash
		obj.SetAnnotations(ann)
	}
	return obj, nil
}

// label gives obj, a set the executor makes, the family's labels and
// those of generation and role. It fails when obj carries one of them
// with another value.
func (f Family) label(obj *unstructured.Unstructured, generation, role string) error {
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	want := maps.Clone(f.Selector)
	want[f.GenerationLabel] = generation
	want[f.roleLabel()] = role
	for k, v := range want {
		if old, ok := lbls[k]; ok && old != v {
			return fmt.Errorf("%w: Build set label %s=%q, the family needs %q", ErrInvalidSet, k, old, v)
		}
		lbls[k] = v
	}
	obj.SetLabels(lbls)
	return nil
}

func (r *run) create(ctx context.Context, d Desired, role Role) error {
	w, err := r.createWrite(ctx, d, role)
	if err != nil || w == nil {
		return err
	}
	return w.run(ctx)
}

// createWrite builds the set of role and returns its create, as a write;
// nil in a dry run.
func (r *run) createWrite(ctx context.Context, d Desired, role Role) (*setWrite, error) {
	obj, err := r.build(ctx, d, role)
	if err != nil {
		return nil, err
	}
	r.record(Call{Verb: "create", Resource: r.family.Resource.Resource, Name: obj.GetName()})
	if r.e.DryRun {
		return nil, nil
	}
	return &setWrite{
		send: func(ctx context.Context) (*unstructured.Unstructured, error) {
			return r.e.sets().Create(ctx, obj, metav1.CreateOptions{})
		},
		done: func(ctx context.Context, made *unstructured.Unstructured, err error) error {
			if !apierrors.IsAlreadyExists(err) {
				if err != nil {
					return &SetError{Name: obj.GetName(), Err: fmt.Errorf("create: %w", err)}
				}
				r.saw(made)
				return nil
			}
			// A retried create after a lost response: adopt the set if it
			// is ours.
			r.setReads.gets++
			live, err := r.e.sets().Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return &SetError{Name: obj.GetName(), Err: fmt.Errorf("get after AlreadyExists: %w", err)}
			}
			s, err := r.family.Observe(live)
			if err != nil || s.Generation != d.Generation || s.Role != role.Name || s.Deleting {
				return &SetError{Name: obj.GetName(), Err: fmt.Errorf("%w: not the live set of %s/%s", ErrNameTaken, d.Generation, role.Name)}
			}
			r.saw(live)
			return nil
		},
	}, nil
}

func (r *run) update(ctx context.Context, d Desired, role Role, cur Set) error {
	want, err := r.build(ctx, d, role)
	if err != nil {
		return err
	}
	sets := r.family.DroppedSets != nil
	if r.e.DryRun {
		// The records of what the update drops are made before it.
		if sets && cur.Object != nil {
			if err := r.recordDroppedSets(ctx, d.Generation, cur.Object, updated(cur.Object, want)); err != nil {
				return &SetError{Name: cur.Name, Err: fmt.Errorf("update in place: %w", err)}
			}
		}
		r.record(Call{Verb: "update", Resource: r.family.Resource.Resource, Name: cur.Name})
		return nil
	}
	first, recorded := true, false
	var done *unstructured.Unstructured
	var left, dropped []Ref // what the record left out, and what it holds
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := cur.Object
		if !first || live == nil {
			var err error
			r.setReads.gets++
			if live, err = r.e.sets().Get(ctx, cur.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		if live.GetUID() != cur.UID {
			return fmt.Errorf("%w: UID is %s, planned for %s", ErrNameTaken, live.GetUID(), cur.UID)
		}
		next := updated(live, want)
		if sets {
			if err := r.recordDroppedSets(ctx, d.Generation, live, next); err != nil {
				return err
			}
		} else {
			var err error
			if dropped, left, err = r.recordDropped(live, next); err != nil {
				return err
			}
		}
		if !recorded {
			r.record(Call{Verb: "update", Resource: r.family.Resource.Resource, Name: cur.Name})
			recorded = true
		}
		var err error
		done, err = r.e.sets().Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return &SetError{Name: cur.Name, Err: fmt.Errorf("update in place: %w", err)}
	}
	r.saw(done)
	if len(left) > 0 {
		return unrecordedError(cur.Name, dropped, left)
	}
	return nil
}

// setContent replaces the content of next, a live set, with that of want,
// the set as built: every top-level field but apiVersion, kind, metadata
// and status. That is spec for a set kind of its own, data for a ConfigMap
// (an inventory set); a content field want lacks is removed.
func setContent(next, want *unstructured.Unstructured) {
	content := func(k string) bool { return k != "apiVersion" && k != "kind" && k != "metadata" && k != "status" }
	for k := range next.Object {
		if _, ok := want.Object[k]; content(k) && !ok {
			delete(next.Object, k)
		}
	}
	for k, v := range want.Object {
		if content(k) {
			next.Object[k] = v
		}
	}
}

// prune deletes what an update in place took out of a set that stays,
// now that the set is Ready for its new spec: each dropped resource that
// no live set of the family lists or still has to prune itself (one that
// does gets it, where the set owns it), as [Executor.Finalize] would when
// the set went (kept, protected and foreign objects stay; an object the set
// owns is released from it if it is kept), with a fresh read before each
// delete. Then it clears [DroppedAnnotation], on condition that the set is
// unchanged since it was read.
func (r *run) prune(ctx context.Context, uid types.UID) error {
	sp, ok := r.set(uid)
	if !ok || len(sp.Dropped) == 0 {
		return nil
	}
	s := *sp
	// Decided as a finalization of what the set dropped (and does not
	// list again): what another live set lists, or still has to prune
	// itself once it is Ready for the spec that dropped it, is kept and,
	// where the set owns it, handed to that set, which the garbage
	// collector would otherwise take it with; the rest is deleted.
	own := make(map[Ref]bool, len(s.Resources))
	for _, ref := range s.Resources {
		own[ref] = true
	}
	pending := Set{Name: s.Name, UID: s.UID, Generation: s.Generation, Role: s.Role, Created: s.Created}
	for _, ref := range s.Dropped {
		if !own[ref] {
			pending.Dropped = append(pending.Dropped, ref)
		}
	}
	items := Finalization(pending, r.view, r.e.Prune).Items
	for i := range items {
		if items[i].Verdict == Delete {
			items[i].Reason = "dropped by an update in place of " + s.Name + ", listed by no other set"
		}
	}
	if err := r.prefetch(ctx, refsOf(items), false); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("prune: read what it dropped: %w", err)}
	}
	r.staying = s.UID
	defer func() { r.staying = "" }()
	others := r.others(uid)
	var errs []error
	for _, it := range items {
		if r.outOfTime() {
			return errOutOfTime
		}
		if _, _, err := r.settle(ctx, s, others, it, true); err != nil {
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("prune what an update dropped: %w", err)}
	}
	r.record(Call{Verb: "patch", Resource: r.family.Resource.Resource, Name: s.Name})
	if r.e.DryRun {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": s.UID, "resourceVersion": s.Object.GetResourceVersion(),
		"annotations": map[string]any{DroppedAnnotation: nil},
	}})
	if err != nil {
		return err
	}
	live, err := r.e.sets().Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		// A Conflict: the set changed (another update dropped more); the
		// next Step prunes again from what it then records.
		return &SetError{Name: s.Name, Err: fmt.Errorf("prune: clear %s: %w", DroppedAnnotation, err)}
	}
	r.saw(live)
	return nil
}

// others returns the sets of the view other than uid.
func (r *run) others(uid types.UID) []Set {
	out := make([]Set, 0, len(r.view))
	for _, s := range r.view {
		if s.UID != uid {
			out = append(out, s)
		}
	}
	return out
}

// retire makes every resource the set lists safe for it to go (shared
// ones handed to their successors, kept ones released; for a set without a
// finalizer, the obsolete resources installed without an owner deleted)
// and then deletes exactly that set, by name and UID.
func (r *run) retire(ctx context.Context, uid types.UID) error {
	w, err := r.retireWrite(ctx, uid)
	if err != nil || w == nil {
		return err
	}
	return w.run(ctx)
}

// needsFinalizer reports whether a set has no finalizer, so no controller
// to finalize it (deleted before its controller first saw it, or it has
// none): the garbage collector takes what it owns, but what it installed
// without an owner would stay for good.
func needsFinalizer(s Set) bool { return s.Object != nil && len(s.Object.GetFinalizers()) == 0 }

// retireWrite does what a retirement does before its delete and returns
// the delete, as a write; nil for a set not in the view, and in a dry run,
// which records the delete and, for a set the Step finalizes itself, what
// that finalization writes.
func (r *run) retireWrite(ctx context.Context, uid types.UID) (*setWrite, error) {
	sp, ok := r.set(uid)
	if !ok {
		return nil, nil
	}
	s := *sp
	d := r.decide(uid)
	others := r.others(uid)
	// A set with no finalizer: the executor finalizes it itself. Its own
	// finalizer keeps the set until that is done, so a delete that fails
	// is tried again by the next Step (ActionFinalize), and nothing is
	// deleted while a live set lists it.
	own := needsFinalizer(s)
	var errs []error
	if err := r.prefetch(ctx, refsOf(d.Items), false); err != nil {
		return nil, &SetError{Name: s.Name, Err: fmt.Errorf("retire: read what it lists: %w", err)}
	}
	for _, it := range d.Items {
		if r.outOfTime() {
			return nil, errOutOfTime
		}
		done, what, err := r.settle(ctx, s, others, it, false)
		if err != nil {
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
			continue
		}
		if what == handedOver || done.Detached {
			r.keptCount++
		}
		// What a live set lists, and a protected or keep-annotated
		// resource released, is final; the rest of what no live set lists
		// is decided when the set is finalized (by finish for a set
		// without a finalizer: it reports it, released or not).
		switch {
		case it.Verdict != Delete, done.Detached && !own:
			r.note(uid, done, what)
		case done.Detached:
			if r.detached == nil {
				r.detached = map[retiredRef]bool{}
			}
			r.detached[retiredRef{uid, it.Ref}] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &SetError{Name: s.Name, Err: fmt.Errorf("retire: hand over or release resources: %w", err)}
	}
	if own {
		if err := r.addFinalizer(ctx, s); err != nil {
			return nil, err
		}
	}
	policy := r.e.Propagation
	if policy == "" {
		policy = metav1.DeletePropagationBackground
	}
	r.record(Call{Verb: "delete", Resource: r.family.Resource.Resource, Name: s.Name})
	sp.Deleting = true // no later retire of this Step hands anything to it
	if r.e.DryRun {
		if own {
			// The Step finalizes the set itself once it is deleted: a dry
			// run lists those writes too (finish writes nothing in one).
			return nil, r.finish(ctx, uid)
		}
		return nil, nil
	}
	return &setWrite{
		send: func(ctx context.Context) (*unstructured.Unstructured, error) {
			return nil, r.e.sets().Delete(ctx, s.Name, metav1.DeleteOptions{
				Preconditions:     &metav1.Preconditions{UID: &uid},
				PropagationPolicy: &policy,
			})
		},
		done: func(ctx context.Context, _ *unstructured.Unstructured, err error) error {
			switch {
			case err == nil:
			case apierrors.IsNotFound(err):
				return nil
			case apierrors.IsConflict(err):
				// The UID precondition failed: the name now holds another
				// object, which this plan did not name. Leave it alone.
				return nil
			default:
				return &SetError{Name: s.Name, Err: fmt.Errorf("retire: %w", err)}
			}
			if own {
				return r.finish(ctx, uid)
			}
			return nil
		},
	}, nil
}

// addFinalizer puts [ExecutorFinalizer] on a set that has no finalizer, on
// condition that it is the set read (UID and resourceVersion): a
// controller that added its own meanwhile makes it a Conflict, and the
// next Step plans again.
func (r *run) addFinalizer(ctx context.Context, s Set) error {
	r.record(Call{Verb: "patch", Resource: r.family.Resource.Resource, Name: s.Name})
	if r.e.DryRun {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": s.UID, "resourceVersion": s.Object.GetResourceVersion(), "finalizers": []string{ExecutorFinalizer},
	}})
	if err != nil {
		return err
	}
	live, err := r.e.sets().Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("retire: add finalizer %s: %w", ExecutorFinalizer, err)}
	}
	r.saw(live)
	return nil
}

// finish finalizes a set the executor retired with its own finalizer, as
// [Executor.Finalize] does: it deletes the obsolete resources the set
// installed without an owner, hands what it owns alone to a live set of
// another family that lists it (the rest the garbage collector takes),
// then removes the finalizer.
func (r *run) finish(ctx context.Context, uid types.UID) error {
	sp, ok := r.set(uid)
	if !ok {
		return nil
	}
	sp.Deleting = true
	s := *sp
	d := r.decide(uid)
	others := r.others(uid)
	// Every obsolete resource, not only those installed without an owner:
	// one the set owns alone that a live set of another family lists goes
	// to that set (see foreign), not to the garbage collector.
	obsolete := d.Of(Delete)
	if err := r.prefetch(ctx, refsOf(obsolete), false); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("finalize: read what it lists: %w", err)}
	}
	var errs []error
	for _, it := range obsolete {
		if r.outOfTime() {
			return errOutOfTime
		}
		done, what, err := r.settle(ctx, s, others, it, true)
		if err != nil {
			errs = append(errs, &ResourceError{Ref: it.Ref, Err: err})
			continue
		}
		r.note(uid, done, what)
	}
	if err := errors.Join(errs...); err != nil {
		return &SetError{Name: s.Name, Err: fmt.Errorf("finalize: delete what it installed without an owner: %w", err)}
	}
	r.record(Call{Verb: "update", Resource: r.family.Resource.Resource, Name: s.Name})
	if r.e.DryRun {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r.setReads.gets++
		live, err := r.e.sets().Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil || live.GetUID() != uid {
			return err
		}
		fins := slices.DeleteFunc(live.GetFinalizers(), func(f string) bool { return f == ExecutorFinalizer })
		if len(fins) == len(live.GetFinalizers()) {
			return nil
		}
		live.SetFinalizers(fins)
		_, err = r.e.sets().Update(ctx, live, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return &SetError{Name: s.Name, Err: fmt.Errorf("finalize: remove finalizer %s: %w", ExecutorFinalizer, err)}
	}
	return nil
}

// outcome is what settle did with one resource.
type outcome int

const (
	skipped    outcome = iota // nothing written: left alone, or gone
	handedOver                // its owners changed: the retiring set's reference moved to live sets that list it
	kept                      // a live set lists it and it needed no write: the retiring set did not own it, or it is gone
	deleted                   // deleted (or, in a dry run, would be)
	collected                 // obsolete and owned by the retiring set alone: the garbage collector deletes it with the set
	unserved                  // its kind is not served: no object can exist
)

// retiredRef is a resource as one retired set lists it.
type retiredRef struct {
	set types.UID
	ref Ref
}

// note records in r.retired what a retirement did with a resource, it
// being final: the Step reports it in [Result]. A resource of a kind not
// served is in r.unserved already.
func (r *run) note(set types.UID, it Item, what outcome) {
	if r.detached[retiredRef{set, it.Ref}] {
		it.Detached = true // by the retirement, before the Step finalized the set
	}
	res := &r.retired
	switch what {
	case handedOver:
		res.HandedOver = append(res.HandedOver, it)
	case kept:
		res.Kept = append(res.Kept, it)
	case deleted:
		res.Deleted = append(res.Deleted, it)
	case collected:
		res.Collected = append(res.Collected, it)
	case unserved:
	default:
		res.Skipped = append(res.Skipped, it)
	}
}

// uniqueItems returns items without repeats, in order: a retirement and
// the finalization that follows it in the same Step may both meet a
// resource whose kind is not served.
func uniqueItems(items []Item) []Item {
	seen := make(map[Item]bool, len(items))
	return slices.DeleteFunc(items, func(it Item) bool {
		dup := seen[it]
		seen[it] = true
		return dup
	})
}

// settle makes one resource the retiring set lists safe for the set to go,
// and returns the item as carried out and what happened:
//
//   - Keep: the resource moves to its successor (ownerReference handover);
//   - a protected or keep-annotated resource stops naming the set, so the
//     garbage collector does not take it when the set goes;
//   - with del (Finalize), an obsolete resource is deleted when
//     [LiveVerdict] allows it and no live set of another family lists it or
//     last wrote it (see foreign); one the retiring set owns is handed to
//     that set instead.
//
// A resource that is gone needs nothing; so does one whose kind is not
// served, unless a live set lists it: then Objects cannot reach an object
// that must be handed over, which is an error.
func (r *run) settle(ctx context.Context, retiring Set, others []Set, it Item, del bool) (Item, outcome, error) {
	if r.objects == nil {
		return it, skipped, fmt.Errorf("%w: executor needs Objects, or Dynamic and Mapper, to reach resources", ErrInvalidFamily)
	}
	fresh := false // read from the API server, not from what prefetch read
	for attempt := 0; ; attempt++ {
		live, err := r.get(ctx, it.Ref, fresh)
		switch {
		case errors.Is(err, ErrNotServed) && it.Verdict == Keep:
			return it, skipped, fmt.Errorf("listed by live set %s, not handed over: %w", it.Successor, err)
		case errors.Is(err, ErrNotServed):
			it.Verdict, it.Reason = Skip, "kind is not served"
			r.unserved = append(r.unserved, it)
			return it, unserved, nil
		case apierrors.IsNotFound(err) && it.Verdict == Keep:
			return it, kept, nil
		case apierrors.IsNotFound(err):
			it.Verdict, it.Reason = Skip, "already gone"
			return it, skipped, nil
		case err != nil:
			var de *DiscoveryError
			if errors.As(err, &de) && !slices.Contains(r.live.reads.Undiscovered, de.Group) {
				r.live.reads.Undiscovered = append(r.live.reads.Undiscovered, de.Group)
			}
			return it, skipped, err
		}
		refs := live.GetOwnerReferences()
		var next []metav1.OwnerReference
		switch verdict, reason := LiveVerdict(it, live, retiring, others, r.e.Prune); {
		case it.Verdict == Keep:
			if !ownedBy(refs, retiring.UID) {
				if slices.Contains(strings.Split(live.GetAnnotations()[ReleasedAnnotation], ","), string(retiring.UID)) {
					return it, handedOver, nil // by an earlier attempt or call
				}
				return it, kept, nil
			}
			next, _ = Handover(refs, retiring.UID, r.owners(it, retiring.UID)...)
		case r.e.Prune.keeps(it.Ref.GroupKind(), live):
			it.Verdict, it.Reason = Skip, reason
			// Release it from every set of the family that is going, not
			// only this one: another deleting owner would take it later;
			// and from the component objects of Prune.Owners, which own
			// what the family applied (no set lists it any more, so the
			// component's removal must not take it either).
			next = slices.DeleteFunc(slices.Clone(refs), func(o metav1.OwnerReference) bool {
				s, ok := r.set(o.UID)
				return o.UID == retiring.UID || (ok && s.Deleting) || slices.Contains(r.e.Prune.Owners, o.UID)
			})
			if len(next) == len(refs) {
				return it, skipped, nil
			}
			it.Detached = true
		case verdict == Delete && del:
			other, why, err := r.foreign(ctx, it.Ref, live)
			switch {
			case err != nil:
				return it, skipped, err
			case other == nil && retiring.UID != r.staying && ownerOf(refs, retiring, others) == OwnedBySet:
				// (refs, not just the owning ones: a placement owner such
				// as a Namespace would keep it from the collector.)
				// The garbage collector deletes it once the set is gone:
				// a delete here would be a write it does not need.
				it.Verdict, it.Reason = Delete, "owned by "+retiring.Name+" alone, listed by no other set: left to the garbage collector"
				return it, collected, nil
			case other == nil && !fresh:
				// Nothing else removes it: confirm on the API server first.
				fresh = true
				continue
			case other == nil:
				it.Verdict, it.Reason = verdict, reason
				err := r.delete(ctx, live, &it)
				if apierrors.IsConflict(err) && attempt < retry.DefaultRetry.Steps {
					// The UID precondition failed (or the server refused
					// for another conflict): whatever holds the name now is
					// decided again from a fresh read.
					continue
				}
				if err != nil || it.Verdict != Delete {
					return it, skipped, err
				}
				return it, deleted, nil
			case !ownedBy(refs, retiring.UID):
				it.Verdict, it.Reason = Skip, why
				return it, skipped, nil
			}
			// Owned by the retiring set alone: the garbage collector would
			// take it with the set, so it goes to the other family's set.
			it.Verdict, it.Successor, it.SuccessorUID, it.Reason = Keep, other.Name, other.UID, why
			next, _ = Handover(refs, retiring.UID, r.family.OwnerReference(*other))
		default:
			it.Verdict, it.Reason = verdict, reason
			return it, skipped, nil
		}
		done := skipped
		if it.Verdict == Keep {
			done = handedOver
		}
		r.record(Call{Verb: "patch", Resource: r.resourceName(it.Ref), Namespace: it.Ref.Namespace, Name: it.Ref.Name})
		if r.e.DryRun {
			return it, done, nil
		}
		live = live.DeepCopy()
		ann := live.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[ReleasedAnnotation] = released(ann[ReleasedAnnotation], retiring.UID)
		live.SetAnnotations(ann)
		r.wrote(it.Ref)
		err = r.objects.SetOwnerReferences(ctx, live, next)
		if apierrors.IsConflict(err) && attempt < retry.DefaultRetry.Steps {
			fresh = true
			continue // read again and decide again
		}
		if apierrors.IsNotFound(err) {
			if it.Verdict == Keep {
				return it, kept, nil
			}
			return it, skipped, nil
		}
		return it, done, err
	}
}

// foreign returns a live set of the family's set kind outside the family
// that lists ref, or whose UID the live object's [WriterAnnotation] names,
// with the reason to leave the object to it; nil when there is none. Such
// an object is not this family's to delete: families can share an object
// (an admission webhook two components serve), and the set that last
// wrote it or still lists it serves it. It lists the set kind once per
// call, on the first object it is asked about, so an operator with one
// family pays nothing until something is about to be deleted.
func (r *run) foreign(ctx context.Context, ref Ref, live *unstructured.Unstructured) (*Set, string, error) {
	if !r.strangersRead {
		list, err := r.listAll(ctx)
		if err != nil {
			return nil, "", err
		}
		r.readStrangers(list.Items)
	}
	if i, ok := r.byRef[ref]; ok {
		s := &r.strangers[i]
		return s, fmt.Sprintf("listed by %s of another family", s.Name), nil
	}
	if w := parseStamp(live.GetAnnotations()[WriterAnnotation]).uid; w != "" {
		for i := range r.strangers {
			if s := &r.strangers[i]; s.UID == w {
				return s, fmt.Sprintf("last written by live set %s of another family", s.Name), nil
			}
		}
	}
	return nil, "", nil
}

// readStrangers keeps, of a List of every set of the kind, the live sets
// outside the family, for foreign.
func (r *run) readStrangers(items []unstructured.Unstructured) {
	r.strangers, r.byRef = nil, map[Ref]int{}
	for i := range items {
		u := &items[i]
		if r.family.Contains(u.GetLabels()) || u.GetDeletionTimestamp() != nil {
			continue
		}
		// What a set of another family lists is read in this family's
		// way: the kind is the same. What cannot be read is left out.
		refs, _ := r.family.resources(u)
		r.strangers = append(r.strangers, Set{Name: u.GetName(), UID: u.GetUID(), Created: u.GetCreationTimestamp().Time, Resources: refs, Labels: u.GetLabels(), Object: u})
		for _, ref := range refs {
			if _, ok := r.byRef[ref]; !ok {
				r.byRef[ref] = len(r.strangers) - 1
			}
		}
	}
	r.strangersRead = true
}

// listAll lists every set of the kind, whatever its family: every object
// of the set resource that carries [Family.KindSelector].
func (r *run) listAll(ctx context.Context) (*unstructured.UnstructuredList, error) {
	r.setReads.lists++
	opts := metav1.ListOptions{}
	if len(r.family.KindSelector) > 0 {
		opts.LabelSelector = labels.SelectorFromSet(r.family.KindSelector).String()
	}
	list, err := r.e.sets().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list every %s (%s): %w", r.family.Resource.Resource, opts.LabelSelector, err)
	}
	return list, nil
}

// observeWide lists every set of the kind with one List call: the family
// becomes the view, as observe makes it, and the rest the strangers.
func (r *run) observeWide(ctx context.Context) error {
	fam := r.family
	list, err := r.listAll(ctx)
	if err != nil {
		return err
	}
	mine := make([]unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		if fam.Contains(list.Items[i].GetLabels()) {
			mine = append(mine, list.Items[i])
		}
	}
	r.view, _ = fam.ObserveAll(mine)
	r.decider = nil
	r.readStrangers(list.Items)
	return nil
}

// delete deletes live, the object of a Delete item, on condition of its UID.
func (r *run) delete(ctx context.Context, live *unstructured.Unstructured, it *Item) error {
	r.record(Call{Verb: "delete", Resource: r.resourceName(it.Ref), Namespace: it.Ref.Namespace, Name: it.Ref.Name})
	if r.e.DryRun {
		return nil
	}
	r.wrote(it.Ref)
	policy := r.e.ResourcePropagation
	if policy == "" {
		policy = metav1.DeletePropagationBackground
	}
	err := r.objects.Delete(ctx, it.Ref, live.GetUID(), policy)
	if apierrors.IsNotFound(err) {
		it.Verdict, it.Reason = Skip, "gone before the delete"
		return nil
	}
	return err // a Conflict: the caller reads the object again and decides anew
}

// resourceName names a resource's REST resource for a Call, from the
// mapper where there is one, else from its kind.
func (r *run) resourceName(ref Ref) string {
	if r.e.Mapper != nil {
		if m, err := r.e.Mapper.RESTMapping(ref.GroupKind()); err == nil {
			return m.Resource.Resource
		}
	}
	plural, _ := meta.UnsafeGuessKindToResource(ref.GroupKind().WithVersion(""))
	return plural.Resource
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}
