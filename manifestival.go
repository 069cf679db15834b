package handoff

import (
	"context"
	"fmt"

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
// its group and kind, with the version Version gives; SetOwnerReferences
// updates the object as read, resourceVersion included, so a write in
// between is a Conflict; Delete carries a UID precondition.
type ManifestivalObjects struct {
	// Client reaches the cluster.
	Client mf.Client
	// Version gives the API version to address a kind with. Nil, or an
	// empty answer, leaves the version empty, which a client that maps
	// kinds with discovery (manifestival/client-go-client) resolves to the
	// preferred version; a client that keys objects by full apiVersion
	// (manifestival's fake) needs the version. [ManifestVersions] builds
	// one from manifests.
	Version func(schema.GroupKind) string
	// NotServed reports whether an error from Client means, for certain,
	// that the kind is not served. Nil means no error does, so a kind the
	// client cannot map fails the call rather than letting it assume that
	// no object exists (fail closed). manifestival/client-go-client maps
	// kinds with controller-runtime's dynamic REST mapper, which
	// discovers the group again on a miss, so for it
	// meta.IsNoMatchError is an honest answer.
	NotServed func(error) bool
}

var _ Objects = ManifestivalObjects{}

// ManifestVersions returns a [ManifestivalObjects.Version] function that
// answers, for each kind, the apiVersion of the first object of that kind
// in manifests, and "" for kinds they do not hold.
func ManifestVersions(manifests ...[]unstructured.Unstructured) func(schema.GroupKind) string {
	v := map[schema.GroupKind]string{}
	for _, objs := range manifests {
		for i := range objs {
			gvk := objs[i].GroupVersionKind()
			if _, ok := v[gvk.GroupKind()]; !ok && gvk.Kind != "" {
				v[gvk.GroupKind()] = gvk.Version
			}
		}
	}
	return func(gk schema.GroupKind) string { return v[gk] }
}

// object returns the skeleton object manifestival addresses a ref with.
func (o ManifestivalObjects) object(ref Ref) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	var version string
	if o.Version != nil {
		version = o.Version(ref.GroupKind())
	}
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

// wrap leads an error with the object and marks a kind known not to be
// served with [ErrNotServed].
func (o ManifestivalObjects) wrap(verb string, ref Ref, err error) error {
	if o.NotServed != nil && o.NotServed(err) {
		return fmt.Errorf("%s %s: %w: %w", verb, ref, ErrNotServed, err)
	}
	return fmt.Errorf("%s %s: %w", verb, ref, err)
}

// Get implements [Objects]. The object returned is a copy.
func (o ManifestivalObjects) Get(ctx context.Context, ref Ref) (*unstructured.Unstructured, error) {
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	live, err := o.Client.Get(o.object(ref))
	if err != nil {
		return nil, o.wrap("get", ref, err)
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
		return o.wrap("update ownerReferences of", RefOf(live), err)
	}
	return nil
}

// Delete implements [Objects]. A missing object is a NotFound error.
func (o ManifestivalObjects) Delete(ctx context.Context, ref Ref, uid types.UID, policy metav1.DeletionPropagation) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	err := o.Client.Delete(o.object(ref),
		mf.Preconditions(metav1.Preconditions{UID: &uid}),
		mf.PropagationPolicy(policy),
		mf.IgnoreNotFound(false))
	if err != nil {
		return o.wrap("delete", ref, err)
	}
	return nil
}
