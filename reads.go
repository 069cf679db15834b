package handoff

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// ObjectLister is implemented by an [Objects] that can list a kind: the
// executor then learns the live state of what a retiring set lists with one
// List per (group-kind, namespace) instead of one Get per object, which
// under client-go's default rate limit (5 requests a second) is the
// difference between seconds and tens of minutes for a large generation.
// [NewDynamicObjects] implements it; manifestival's mf.Client cannot list,
// so [ManifestivalObjects] does not, and the executor reads its objects
// with Gets, [readParallelism] at a time.
type ObjectLister interface {
	// List reads one page of the objects of a kind in a namespace (empty
	// for a cluster-scoped kind); opts carries Limit and Continue. An
	// error wraps [ErrNotServed] only when the kind is known not to be
	// served.
	List(ctx context.Context, gk schema.GroupKind, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
}

var _ ObjectLister = (*dynamicObjects)(nil)

// List implements [ObjectLister].
func (o *dynamicObjects) List(ctx context.Context, gk schema.GroupKind, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	c, err := o.resource(Ref{Group: gk.Group, Kind: gk.Kind, Namespace: namespace})
	if err != nil {
		return nil, err
	}
	return c.List(ctx, opts)
}

// metadataLister is an [Objects] that can list the metadata of a kind's
// objects alone: [NewDynamicObjects]'s, given [Executor.Metadata]. The
// objects it returns carry apiVersion, kind and metadata and nothing else,
// so the executor reads through it only what it decides from metadata
// (ownership, annotations, UIDs: the handover and what Finalize deletes),
// never what a probe reads, and writes them only through the same
// Objects' SetOwnerReferences, a merge patch of metadata, and Delete.
type metadataLister interface {
	// listMetadata is [ObjectLister.List] with metadata alone; ok is
	// false when the Objects has no metadata client.
	listMetadata(ctx context.Context, gk schema.GroupKind, namespace string, opts metav1.ListOptions) (list *unstructured.UnstructuredList, ok bool, err error)
}

var _ metadataLister = (*dynamicObjects)(nil)

// listMetadata implements [metadataLister] with the metadata client, which
// asks for PartialObjectMetadataList (protobuf where the server offers it).
func (o *dynamicObjects) listMetadata(ctx context.Context, gk schema.GroupKind, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, bool, error) {
	if o.meta == nil {
		return nil, false, nil
	}
	m, err := o.mapping(gk)
	if err != nil {
		return nil, true, err
	}
	var c metadata.ResourceInterface = o.meta.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		c = o.meta.Resource(m.Resource).Namespace(namespace)
	}
	list, err := c.List(ctx, opts)
	if err != nil {
		return nil, true, err
	}
	out := &unstructured.UnstructuredList{Items: make([]unstructured.Unstructured, 0, len(list.Items))}
	out.SetContinue(list.Continue)
	out.SetResourceVersion(list.ResourceVersion)
	for i := range list.Items {
		// Nothing read through a metadataLister is written whole, so its
		// managedFields are never sent back; they are most of what the
		// conversion would copy.
		list.Items[i].ManagedFields = nil
		md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&list.Items[i].ObjectMeta)
		if err != nil {
			return nil, true, fmt.Errorf("metadata of %s %s: %w", gk, list.Items[i].Name, err)
		}
		u := unstructured.Unstructured{Object: map[string]any{"metadata": md}}
		u.SetGroupVersionKind(m.GroupVersionKind)
		out.Items = append(out.Items, u)
	}
	return out, true, nil
}

// readParallelism is how many Gets the executor has in flight at once when
// it cannot list a kind (the Objects cannot, or RBAC grants get but not
// list). The client's rate limiter still paces them.
const readParallelism = 8

// listPageSize is the Limit of each List page.
const listPageSize = 500

// Scope is a group-kind in a namespace: what one List reads.
type Scope struct {
	Group, Kind, Namespace string
}

// String renders the scope as Kind.group in namespace.
func (s Scope) String() string {
	k := s.Kind
	if s.Group != "" {
		k += "." + s.Group
	}
	if s.Namespace != "" {
		return k + " in " + s.Namespace
	}
	return k
}

func scopeOf(r Ref) Scope { return Scope{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace} }

// Reads says how a call learned the live state of the resources it
// settled.
type Reads struct {
	// Lists and Gets count the API reads of listed resources, List pages
	// and Gets (the confirmations before a delete included).
	Lists, Gets int
	// Fallback names the scopes read with Gets because they could not be
	// listed: the Objects cannot list, or the List was forbidden.
	Fallback []Scope
	// Undiscovered names the API groups whose discovery failed (see
	// [Executor.Discovery]): what is listed in their kinds was left alone.
	Undiscovered []string
}

// liveState is what one call read of the resources sets list: every
// object of the scopes it listed whole (a resource missing from such a
// scope is gone, whichever set of the call asked for it), what it read
// with Gets, and the errors reading them.
type liveState struct {
	objs     map[Ref]*unstructured.Unstructured
	gone     map[Ref]bool    // NotFound to a Get
	failed   map[Ref]error   // a Get's error
	read     map[Scope]bool  // listed whole
	partial  map[Scope]bool  // listed whole, metadata alone (see metadataLister)
	scopeErr map[Scope]error // the List failed (not for want of permission)
	stale    map[Ref]bool    // written by the call since it was read
	reads    Reads
}

// known reports whether the call has read ref, and not written it since.
func (l *liveState) known(ref Ref) bool {
	if l.stale[ref] {
		return false
	}
	sc := scopeOf(ref)
	return l.read[sc] || l.scopeErr[sc] != nil || l.objs[ref] != nil || l.gone[ref] || l.failed[ref] != nil
}

// prefetch reads the live state of refs with one List per scope not yet
// read, paged, or, where that cannot be done, with Gets in parallel. Errors
// are kept per resource and returned by get, so one scope that cannot be
// read does not stop the others. With whole false, a scope may be listed
// with metadata alone (see metadataLister); with whole true, one listed so
// is listed again whole.
func (r *run) prefetch(ctx context.Context, refs []Ref, whole bool) error {
	if r.objects == nil {
		return nil
	}
	if r.live.objs == nil {
		r.live = liveState{objs: map[Ref]*unstructured.Unstructured{}, gone: map[Ref]bool{}, failed: map[Ref]error{},
			read: map[Scope]bool{}, partial: map[Scope]bool{}, scopeErr: map[Scope]error{}}
	}
	byScope := map[Scope][]Ref{}
	var order []Scope
	for _, ref := range refs {
		sc := scopeOf(ref)
		if whole && r.live.partial[sc] {
			r.forget(sc)
		}
		if r.live.read[sc] || r.live.scopeErr[sc] != nil || r.live.known(ref) {
			// (A resource of a scope read whole that the call wrote
			// since is read again by get, with a Get.)
			continue
		}
		if _, ok := byScope[sc]; !ok {
			order = append(order, sc)
		}
		byScope[sc] = append(byScope[sc], ref)
	}
	lister, canList := r.objects.(ObjectLister)
	for _, sc := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.outOfTime() {
			return errOutOfTime
		}
		want := byScope[sc]
		if canList && !slices.Contains(r.live.reads.Fallback, sc) {
			err := r.listScope(ctx, lister, sc, whole)
			switch {
			case err == nil:
				r.live.read[sc] = true
				continue
			case apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err):
				// RBAC grants get but not list: read each object.
			default:
				r.live.scopeErr[sc] = err
				continue
			}
		}
		if !slices.Contains(r.live.reads.Fallback, sc) {
			r.live.reads.Fallback = append(r.live.reads.Fallback, sc)
		}
		r.getEach(ctx, want)
	}
	return nil
}

// forget drops what the call read of a scope, so it is read again.
func (r *run) forget(sc Scope) {
	for ref := range r.live.objs {
		if scopeOf(ref) == sc {
			delete(r.live.objs, ref)
		}
	}
	delete(r.live.read, sc)
	delete(r.live.partial, sc)
}

// listScope lists a scope page by page and records every object of it:
// with metadata alone when whole is false and the lister can.
func (r *run) listScope(ctx context.Context, lister ObjectLister, sc Scope, whole bool) error {
	gk := schema.GroupKind{Group: sc.Group, Kind: sc.Kind}
	found := map[Ref]*unstructured.Unstructured{}
	opts := metav1.ListOptions{Limit: listPageSize}
	ml, _ := lister.(metadataLister)
	partial := false
	for {
		r.live.reads.Lists++
		var page *unstructured.UnstructuredList
		var err error
		ok := false
		if ml != nil && !whole {
			page, ok, err = ml.listMetadata(ctx, gk, sc.Namespace, opts)
			partial = ok
		}
		if !ok {
			page, err = lister.List(ctx, gk, sc.Namespace, opts)
		}
		if err != nil {
			return err
		}
		for i := range page.Items {
			u := &page.Items[i]
			if u.GetKind() == "" {
				u.SetGroupVersionKind(gk.WithVersion(""))
			}
			// The identity of what a set lists: the kind as listed (an
			// item may carry no apiVersion and kind of its own).
			found[Ref{Group: sc.Group, Kind: sc.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}] = u
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	// Only once the List is whole: a scope half read proves nothing gone.
	// The List is newer than anything the call wrote before it.
	for ref, u := range found {
		r.live.objs[ref] = u
		delete(r.live.stale, ref)
	}
	if partial {
		r.live.partial[sc] = true
	}
	return nil
}

// getEach reads refs with Gets, readParallelism at a time.
func (r *run) getEach(ctx context.Context, refs []Ref) {
	type answer struct {
		ref Ref
		obj *unstructured.Unstructured
		err error
	}
	answers := make([]answer, len(refs))
	sem := make(chan struct{}, readParallelism)
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			obj, err := r.objects.Get(ctx, ref)
			answers[i] = answer{ref: ref, obj: obj, err: err}
		}()
	}
	wg.Wait()
	r.live.reads.Gets += len(refs)
	for _, a := range answers {
		delete(r.live.stale, a.ref)
		delete(r.live.objs, a.ref)
		delete(r.live.gone, a.ref)
		delete(r.live.failed, a.ref)
		switch {
		case a.err == nil:
			r.live.objs[a.ref] = a.obj
		case apierrors.IsNotFound(a.err):
			r.live.gone[a.ref] = true
		default:
			r.live.failed[a.ref] = a.err
		}
	}
}

// get returns the live object of ref: from what prefetch read, unless
// fresh is true, the call wrote ref since, or prefetch did not read it;
// else with a Get. A resource missing from a scope listed whole is a
// NotFound error. The object returned may be shared with the call's
// state: copy it before changing it.
func (r *run) get(ctx context.Context, ref Ref, fresh bool) (*unstructured.Unstructured, error) {
	if !fresh && r.live.known(ref) {
		sc := scopeOf(ref)
		switch {
		case r.live.objs[ref] != nil:
			return r.live.objs[ref], nil
		case r.live.failed[ref] != nil:
			return nil, r.live.failed[ref]
		case r.live.scopeErr[sc] != nil:
			return nil, r.live.scopeErr[sc]
		default: // gone to a Get, or missing from the scope's List
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: ref.Group, Resource: ref.Kind}, ref.Name)
		}
	}
	r.live.reads.Gets++
	return r.objects.Get(ctx, ref)
}

// wrote marks what the call read of ref as older than the cluster.
func (r *run) wrote(ref Ref) {
	if r.live.stale == nil {
		r.live.stale = map[Ref]bool{}
	}
	r.live.stale[ref] = true
}

// refsOf returns the resources of items, in their order.
func refsOf(items []Item) []Ref {
	out := make([]Ref, 0, len(items))
	for _, it := range items {
		out = append(out, it.Ref)
	}
	return out
}
