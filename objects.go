package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// Errors about reaching the resources sets list.
var (
	// ErrNotServed means the cluster does not serve a listed resource's
	// kind, established by a fresh discovery: no object of it can exist.
	ErrNotServed = errors.New("kind is not served")
	// ErrStaleMapper means the REST mapper does not know a listed
	// resource's kind and cannot be refreshed (it is not a
	// [meta.ResettableRESTMapper]), so the kind may be served all the same.
	// Nothing that depends on the object's absence goes ahead. The fix is
	// a mapper that can be reset: client-go's
	// restmapper.NewDeferredDiscoveryRESTMapper over a
	// memory.NewMemCacheClient of the cluster's discovery (package
	// handoffctrl has one for controller-runtime managers, whose own
	// mapper cannot be reset).
	ErrStaleMapper = errors.New("REST mapper does not know the kind and cannot be reset: give the executor a meta.ResettableRESTMapper, such as client-go's restmapper.NewDeferredDiscoveryRESTMapper")
)

// Objects reaches the resources that sets list: the ownership handover
// before a retirement and [Executor.Finalize] read, re-own and delete them
// through it. [NewDynamicObjects] implements it over a dynamic client and a
// REST mapper; an operator that holds another client (a manifestival
// mf.Client) adapts that.
//
// Get fails with an error wrapping [ErrNotServed] only when the kind is
// known not to be served; an implementation that cannot tell returns
// another error, and nothing that relies on the object's absence proceeds.
type Objects interface {
	// Get reads the live object; a missing object is a NotFound error.
	Get(ctx context.Context, ref Ref) (*unstructured.Unstructured, error)
	// SetOwnerReferences replaces the ownerReferences of live, the object
	// as read by Get, with refs, and writes live's [ReleasedAnnotation] as
	// the caller set it, on condition that its resourceVersion is
	// unchanged: a write in between makes it fail with a Conflict error.
	// (An Update of live with refs does both.)
	SetOwnerReferences(ctx context.Context, live *unstructured.Unstructured, refs []metav1.OwnerReference) error
	// Delete deletes the object of ref on condition that its UID is uid,
	// with the given propagation policy.
	Delete(ctx context.Context, ref Ref, uid types.UID, policy metav1.DeletionPropagation) error
}

// NewDynamicObjects returns [Objects] over a dynamic client, resolving kinds
// with mapper. A kind the mapper does not know is resolved again after a
// reset when mapper is a [meta.ResettableRESTMapper] (client-go's
// DeferredDiscoveryRESTMapper over a memory cache stays "fresh" once
// filled, so a CRD served later would never be seen); only a kind still
// unknown then is [ErrNotServed]. A mapper that cannot be reset gives
// [ErrStaleMapper] instead.
//
// Resets are bounded per call, never per lifetime, so a value kept for the
// life of an operator goes on learning kinds served after it started: used
// directly, each method call may reset the mapper once; set as
// [Executor.Objects], each Step and each Finalize may reset it once, for
// all the resources that call reaches.
func NewDynamicObjects(client dynamic.Interface, mapper meta.RESTMapper) Objects {
	return &dynamicObjects{client: client, mapper: mapper}
}

type dynamicObjects struct {
	client dynamic.Interface
	mapper meta.RESTMapper
	// meta, if set, lists objects' metadata alone (see metadataLister).
	meta metadata.Interface
	// res is the reset budget of one executor call; nil gives every
	// method call a budget of its own.
	res *resolver
}

var (
	_ Objects    = (*dynamicObjects)(nil)
	_ callScoped = (*dynamicObjects)(nil)
)

// callScoped is an [Objects] whose state belongs to one executor call: the
// executor asks it for the value to use during a Step or a Finalize.
type callScoped interface {
	forCall(disco discovery.DiscoveryInterface, md metadata.Interface) Objects
}

// forCall gives the call a reset budget of its own, the executor's
// discovery client, and its metadata client unless the value has one.
func (o *dynamicObjects) forCall(disco discovery.DiscoveryInterface, md metadata.Interface) Objects {
	res := newResolver(o.mapper)
	res.disco = disco
	if o.meta != nil {
		md = o.meta
	}
	return &dynamicObjects{client: o.client, mapper: o.mapper, meta: md, res: res}
}

// mapping resolves a kind with the call's resolver.
func (o *dynamicObjects) mapping(gk schema.GroupKind) (*meta.RESTMapping, error) {
	res := o.res
	if res == nil {
		res = newResolver(o.mapper)
	}
	return res.mapping(gk)
}

func (o *dynamicObjects) resource(ref Ref) (dynamic.ResourceInterface, error) {
	m, err := o.mapping(ref.GroupKind())
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return o.client.Resource(m.Resource).Namespace(ref.Namespace), nil
	}
	return o.client.Resource(m.Resource), nil
}

func (o *dynamicObjects) Get(ctx context.Context, ref Ref) (*unstructured.Unstructured, error) {
	c, err := o.resource(ref)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, ref.Name, metav1.GetOptions{})
}

func (o *dynamicObjects) SetOwnerReferences(ctx context.Context, live *unstructured.Unstructured, refs []metav1.OwnerReference) error {
	ref := RefOf(live)
	c, err := o.resource(ref)
	if err != nil {
		return err
	}
	// A merge patch replaces the whole list; an explicit null clears it.
	var owners any = refs
	if len(refs) == 0 {
		owners = nil
	}
	var mark any // null removes the annotation
	if v, ok := live.GetAnnotations()[ReleasedAnnotation]; ok {
		mark = v
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": live.GetResourceVersion(),
		"ownerReferences": owners,
		"annotations":     map[string]any{ReleasedAnnotation: mark},
	}})
	if err != nil {
		return err
	}
	_, err = c.Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (o *dynamicObjects) Delete(ctx context.Context, ref Ref, uid types.UID, policy metav1.DeletionPropagation) error {
	c, err := o.resource(ref)
	if err != nil {
		return err
	}
	return c.Delete(ctx, ref.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &policy,
	})
}

// resolver maps kinds with a REST mapper, resetting a resettable mapper
// once on the first kind it does not know: one resolver serves one call.
// With a discovery client it proves a kind not served (see notServed).
type resolver struct {
	m     meta.RESTMapper
	disco discovery.DiscoveryInterface
	reset bool
}

func newResolver(m meta.RESTMapper) *resolver { return &resolver{m: m} }

func (r *resolver) mapping(gk schema.GroupKind) (*meta.RESTMapping, error) {
	if r.m == nil {
		return nil, fmt.Errorf("%w: no REST mapper to resolve %s", ErrInvalidFamily, gk)
	}
	m, err := r.m.RESTMapping(gk)
	if !meta.IsNoMatchError(err) {
		return m, err
	}
	rm, ok := r.m.(meta.ResettableRESTMapper)
	if !ok {
		return nil, fmt.Errorf("%s: %w: %w", gk, ErrStaleMapper, err)
	}
	if !r.reset {
		r.reset = true
		rm.Reset()
		if m, err = r.m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			return m, err
		}
	}
	return r.notServed(gk, err)
}

// notServed answers for a kind the mapper does not know after a reset.
// Without a discovery client that is [ErrNotServed]. With one, it is so
// only if discovery proves it: the group is not served, or every version
// of it was discovered and none has the kind. A group whose discovery
// fails (an aggregated API that is down: a DeferredDiscoveryRESTMapper
// then drops the group's kinds without an error) makes the kind unknown,
// a [*DiscoveryError]; a kind discovery finds is mapped from it.
func (r *resolver) notServed(gk schema.GroupKind, noMatch error) (*meta.RESTMapping, error) {
	if r.disco == nil {
		return nil, fmt.Errorf("%s: %w (after a fresh discovery): %w", gk, ErrNotServed, noMatch)
	}
	groups, err := r.disco.ServerGroups()
	if err != nil {
		return nil, &DiscoveryError{Group: gk.Group, Err: err}
	}
	i := slices.IndexFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == gk.Group })
	if i < 0 {
		return nil, fmt.Errorf("%s: %w: discovery lists no group %q: %w", gk, ErrNotServed, gk.Group, noMatch)
	}
	for _, v := range groups.Groups[i].Versions {
		list, err := r.disco.ServerResourcesForGroupVersion(v.GroupVersion)
		if err != nil {
			return nil, &DiscoveryError{Group: gk.Group, Err: err}
		}
		gv, err := schema.ParseGroupVersion(v.GroupVersion)
		if err != nil {
			return nil, &DiscoveryError{Group: gk.Group, Err: err}
		}
		for _, res := range list.APIResources {
			if res.Kind != gk.Kind || strings.Contains(res.Name, "/") {
				continue
			}
			scope := meta.RESTScopeRoot
			if res.Namespaced {
				scope = meta.RESTScopeNamespace
			}
			return &meta.RESTMapping{Resource: gv.WithResource(res.Name), GroupVersionKind: gv.WithKind(gk.Kind), Scope: scope}, nil
		}
	}
	return nil, fmt.Errorf("%s: %w: no version of group %q has the kind: %w", gk, ErrNotServed, gk.Group, noMatch)
}

// ScopeFrom returns a [Family.ClusterScoped] function that asks mapper for
// a kind's scope, resetting a [meta.ResettableRESTMapper] once on a kind it
// does not know, and falls back to [WellKnownClusterScoped] for kinds still
// unknown. A set controller uses it so that its view of what a set lists
// matches the executor's. It remembers each answer: make one per reconcile.
func ScopeFrom(mapper meta.RESTMapper) func(schema.GroupKind) bool {
	return newResolver(mapper).clusterScoped()
}

// clusterScoped tells a kind's scope from the mapper, with
// [WellKnownClusterScoped] as the fallback for kinds it cannot resolve.
// It remembers each answer, so a Step asks the mapper once per kind.
func (r *resolver) clusterScoped() func(schema.GroupKind) bool {
	known := map[schema.GroupKind]bool{}
	return func(gk schema.GroupKind) bool {
		if v, ok := known[gk]; ok {
			return v
		}
		v := WellKnownClusterScoped(gk)
		if m, err := r.mapping(gk); err == nil {
			v = m.Scope.Name() == meta.RESTScopeNameRoot
		}
		known[gk] = v
		return v
	}
}
