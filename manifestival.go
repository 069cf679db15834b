package handoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	mf "github.com/manifestival/manifestival"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ManifestivalObjects is [Objects] over a manifestival mf.Client, the
// client most manifestival-based operators already hold (tektoncd/operator's
// set reconciler does). It lets [Executor.Finalize] and the executor's
// retirement reach listed resources without a dynamic client or a REST
// mapper of their own.
//
// mf.Client takes no context, so the context passed to its methods only
// stops a call that has not started. Get and Delete address a resource by
// its group and kind, at each version Versions gives in turn and then at
// none (the client's preferred version), moving on only while the client
// says the version is not served: identity is GroupKind + namespace +
// name, and an object listed at a version the server no longer serves
// (autoscaling/v2beta2 after a Kubernetes upgrade) is the same object at a
// version it serves. Only when every attempt says not served is the kind
// [ErrNotServed]. SetOwnerReferences updates the object as read,
// resourceVersion included, so a write in between is a Conflict; Delete
// carries a UID precondition.
type ManifestivalObjects struct {
	// Client reaches the cluster.
	Client mf.Client
	// Versions gives the API versions to address a kind with, most
	// preferred first. A client that keys objects by full apiVersion
	// (manifestival's fake) needs them; one that maps kinds with discovery
	// (manifestival/client-go-client) resolves the empty version, tried
	// last, to the preferred one. Nil tries the empty version alone.
	// [ManifestVersions] builds one from manifests.
	Versions func(schema.GroupKind) []string
	// NotServed reports whether an error from Client means, for certain,
	// that the version asked for is not served. Nil means no error does,
	// so a kind the client cannot map fails the call rather than letting
	// it assume that no object exists (fail closed).
	// manifestival/client-go-client maps kinds with controller-runtime's
	// dynamic REST mapper, which discovers the group again on a miss, so
	// for it meta.IsNoMatchError is an honest answer.
	NotServed func(error) bool
}

var _ Objects = ManifestivalObjects{}

// ManifestVersions returns a [ManifestivalObjects.Versions] function that
// answers, for each kind, every apiVersion its objects have in manifests,
// in the order they first appear, and nothing for kinds they do not hold.
// Pass the successors' manifests first: their versions are the newer ones.
func ManifestVersions(manifests ...[]unstructured.Unstructured) func(schema.GroupKind) []string {
	v := map[schema.GroupKind][]string{}
	for _, objs := range manifests {
		for i := range objs {
			gvk := objs[i].GroupVersionKind()
			if gvk.Kind == "" || gvk.Version == "" || slices.Contains(v[gvk.GroupKind()], gvk.Version) {
				continue
			}
			v[gvk.GroupKind()] = append(v[gvk.GroupKind()], gvk.Version)
		}
	}
	return func(gk schema.GroupKind) []string { return v[gk] }
}

// versions returns the versions to try for a kind: those Versions gives,
// then the empty one.
func (o ManifestivalObjects) versions(gk schema.GroupKind) []string {
	var vs []string
	if o.Versions != nil {
		vs = slices.DeleteFunc(slices.Clone(o.Versions(gk)), func(v string) bool { return v == "" })
	}
	return append(vs, "")
}

// at calls fn with the skeleton object of ref at each version in turn,
// while the client says that version is not served. It returns fn's first
// answer that is not "not served"; when every version is not served, an
// error wrapping [ErrNotServed] that names them.
func (o ManifestivalObjects) at(verb string, ref Ref, fn func(*unstructured.Unstructured) error) error {
	var tried []string
	var errs []error
	for _, v := range o.versions(ref.GroupKind()) {
		err := fn(o.object(ref, v))
		if err == nil {
			return nil
		}
		if o.NotServed == nil || !o.NotServed(err) {
			return fmt.Errorf("%s %s: %w", verb, ref, err)
		}
		if v == "" {
			v = "preferred version"
		}
		tried = append(tried, v)
		errs = append(errs, err)
	}
	return fmt.Errorf("%s %s: %w at %s: %w", verb, ref, ErrNotServed, strings.Join(tried, ", "), errors.Join(errs...))
}

// object returns the skeleton object manifestival addresses a ref with.
func (o ManifestivalObjects) object(ref Ref, version string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: ref.Group, Version: version, Kind: ref.Kind})
	u.SetNamespace(ref.Namespace)
	u.SetName(ref.Name)
	return u
}

func (o ManifestivalObjects) check(ctx context.Context) error {
	if o.Client == nil {
		return fmt.Errorf("%w: ManifestivalObjects has no Client", ErrInvalidFamily)
	}
	return ctx.Err()
}

// Get implements [Objects]. The object returned is a copy.
func (o ManifestivalObjects) Get(ctx context.Context, ref Ref) (*unstructured.Unstructured, error) {
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	var live *unstructured.Unstructured
	err := o.at("get", ref, func(u *unstructured.Unstructured) error {
		var err error
		live, err = o.Client.Get(u)
		return err
	})
	if err != nil {
		return nil, err
	}
	if live == nil {
		return nil, fmt.Errorf("get %s: client returned no object and no error", ref)
	}
	return live.DeepCopy(), nil
}

// SetOwnerReferences implements [Objects] with an update of the object as
// read: its resourceVersion makes a write in between a Conflict.
func (o ManifestivalObjects) SetOwnerReferences(ctx context.Context, live *unstructured.Unstructured, refs []metav1.OwnerReference) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	next := live.DeepCopy()
	next.SetOwnerReferences(refs)
	if err := o.Client.Update(next); err != nil {
		return fmt.Errorf("update ownerReferences of %s: %w", RefOf(live), err)
	}
	return nil
}

// Delete implements [Objects]. A missing object is a NotFound error.
func (o ManifestivalObjects) Delete(ctx context.Context, ref Ref, uid types.UID, policy metav1.DeletionPropagation) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	return o.at("delete", ref, func(u *unstructured.Unstructured) error {
		return o.Client.Delete(u,
			mf.Preconditions(metav1.Preconditions{UID: &uid}),
			mf.PropagationPolicy(policy),
			mf.IgnoreNotFound(false))
	})
}
