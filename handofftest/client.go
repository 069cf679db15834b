package handofftest

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	k8stesting "k8s.io/client-go/testing"
)

// client is the dynamic.Interface of one actor.
type client struct {
	c     *Cluster
	actor string
	meta  bool // the calls are a metadata client's (see MetadataFor)
}

var (
	_ dynamic.Interface                      = (*client)(nil)
	_ dynamic.NamespaceableResourceInterface = (*resource)(nil)
)

func (cl *client) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &resource{client: cl, gvr: gvr}
}

// resource is a client for one resource, in one namespace or none.
type resource struct {
	*client
	gvr schema.GroupVersionResource
	ns  string
}

func (r *resource) Namespace(ns string) dynamic.ResourceInterface {
	out := *r
	out.ns = ns
	return &out
}

func (r *resource) call(verb, name string, sub []string) Call {
	call := Call{Actor: r.actor, Verb: verb, Resource: r.gvr, Namespace: r.ns, Name: name, Metadata: r.meta}
	if len(sub) > 0 {
		call.Subresource = sub[0]
	}
	return call
}

// serve runs one API call: it consults the faults, advances the clock,
// runs fn under the cluster's lock and records the call.
func serve[T any](ctx context.Context, c *Cluster, call Call, action k8stesting.Action, fn func(ev event) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	fault := c.consult(call)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.tick()
	c.calls[CallKey{Actor: call.Actor, Verb: call.Verb}]++
	res, err := zero, fault.Err
	name := call.Name
	if fault.Err == nil || fault.Mode == AfterCommit {
		res, err = fn(event{now: now, actor: call.Actor, verb: call.Verb, subresource: call.Subresource})
		if made, ok := any(res).(*unstructured.Unstructured); ok && made != nil && call.Verb == "create" {
			name = made.GetName() // generated from metadata.generateName
		}
		if fault.Err != nil {
			res, err = zero, fault.Err
		}
	}
	c.actions = append(c.actions, Action{Action: action, Actor: call.Actor, Name: name, Time: now, Err: err, Injected: fault.Err != nil, Metadata: call.Metadata})
	return res, err
}

// snapshot copies a request body for the action log. It goes through
// JSON, as a real client would, because DeepCopy panics on values such as
// int that callers may put in an object; nil means it cannot be encoded.
func snapshot(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	out, err := normalize(u.Object)
	if err != nil {
		return nil
	}
	return out
}

func (r *resource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	name := ""
	if obj != nil {
		name = obj.GetName()
	}
	call := r.call("create", name, sub)
	action := k8stesting.NewCreateSubresourceAction(r.gvr, name, call.Subresource, r.ns, snapshot(obj))
	return serve(ctx, r.c, call, action, func(ev event) (*unstructured.Unstructured, error) {
		if len(sub) > 0 {
			return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "create "+call.Subresource)
		}
		return r.c.create(ev, r.gvr, r.ns, obj, opts)
	})
}

func (r *resource) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	name := ""
	if obj != nil {
		name = obj.GetName()
	}
	call := r.call("update", name, sub)
	action := k8stesting.NewUpdateSubresourceAction(r.gvr, call.Subresource, r.ns, snapshot(obj))
	return serve(ctx, r.c, call, action, func(ev event) (*unstructured.Unstructured, error) {
		return r.c.update(ev, r.gvr, r.ns, obj, opts, sub)
	})
}

func (r *resource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return r.Update(ctx, obj, opts, "status")
}

func (r *resource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	call := r.call("delete", name, sub)
	action := k8stesting.NewDeleteSubresourceAction(r.gvr, call.Subresource, r.ns, name)
	action.DeleteOptions = opts
	_, err := serve(ctx, r.c, call, action, func(ev event) (struct{}, error) {
		if err := subresourceError(r.gvr.GroupResource(), name, sub, false); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, r.c.delete(ev, r.gvr, r.ns, name, opts)
	})
	return err
}

func (r *resource) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	call := r.call("deletecollection", "", nil)
	action := k8stesting.NewDeleteCollectionAction(r.gvr, r.ns, parseable(listOpts))
	_, err := serve(ctx, r.c, call, action, func(ev event) (struct{}, error) {
		return struct{}{}, r.c.deleteCollection(ev, r.gvr, r.ns, opts, listOpts)
	})
	return err
}

func (r *resource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	call := r.call("get", name, sub)
	action := k8stesting.NewGetSubresourceAction(r.gvr, r.ns, call.Subresource, name)
	return serve(ctx, r.c, call, action, func(event) (*unstructured.Unstructured, error) {
		return r.c.get(r.gvr, r.ns, name, sub)
	})
}

func (r *resource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	call := r.call("list", "", nil)
	r.c.mu.Lock()
	gvk := r.gvr.GroupVersion().WithKind(r.c.kinds[r.gvr].kind + "List")
	r.c.mu.Unlock()
	action := k8stesting.NewListAction(r.gvr, gvk, r.ns, parseable(opts))
	return serve(ctx, r.c, call, action, func(event) (*unstructured.UnstructuredList, error) {
		return r.c.list(r.gvr, r.ns, opts)
	})
}

// parseable returns opts without the selectors that do not parse, which
// the client-go action constructors would panic on; the server answers
// them with BadRequest.
func parseable(opts metav1.ListOptions) metav1.ListOptions {
	if _, err := labels.Parse(opts.LabelSelector); err != nil {
		opts.LabelSelector = ""
	}
	if _, err := fields.ParseSelector(opts.FieldSelector); err != nil {
		opts.FieldSelector = ""
	}
	return opts
}

// Watch watches the resource as the API server does (see the package
// doc): it is one call of verb watch, subject to the actor's faults when
// it starts; its events follow every later write until ctx is done, the
// returned watch is stopped or opts.TimeoutSeconds pass.
func (r *resource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	call := r.call("watch", "", nil)
	action := k8stesting.NewWatchAction(r.gvr, r.ns, parseable(opts))
	var started *watchStart
	start, err := serve(ctx, r.c, call, action, func(event) (*watchStart, error) {
		s, err := r.c.startWatch(r.gvr, r.ns, opts)
		started = s
		return s, err
	})
	if err != nil {
		if started != nil { // an injected fault after the watch started
			r.c.unwatch(started.w)
		}
		return nil, err
	}
	return r.c.run(ctx, start), nil
}

func (r *resource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	call := r.call("patch", name, sub)
	action := k8stesting.NewPatchSubresourceAction(r.gvr, r.ns, name, pt, append([]byte(nil), data...), sub...)
	return serve(ctx, r.c, call, action, func(ev event) (*unstructured.Unstructured, error) {
		return r.c.patch(ev, r.gvr, r.ns, name, pt, data, opts, sub)
	})
}

// Apply is not supported: it fails with MethodNotSupported.
func (r *resource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, sub ...string) (*unstructured.Unstructured, error) {
	call := r.call("apply", name, sub)
	action := k8stesting.NewPatchSubresourceAction(r.gvr, r.ns, name, types.ApplyPatchType, nil, sub...)
	return serve(ctx, r.c, call, action, func(event) (*unstructured.Unstructured, error) {
		return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "apply")
	})
}

// ApplyStatus is not supported: it fails with MethodNotSupported.
func (r *resource) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return r.Apply(ctx, name, obj, opts, "status")
}
