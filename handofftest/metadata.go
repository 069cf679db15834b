package handofftest

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
)

// MetadataFor returns a metadata client (client-go's [metadata.Interface],
// what handoff's Executor.Metadata takes) whose calls and writes are
// attributed to actor, as [Cluster.ClientFor]'s are. It serves the same
// objects as the dynamic clients; its answers carry apiVersion
// meta.k8s.io/v1, kind PartialObjectMetadata and the object's metadata,
// nothing else. Each call is one call of its verb, counted in
// [Cluster.Calls] with the dynamic clients', and its [Call] and [Action]
// have Metadata set, so a [FaultFunc] can fail metadata calls alone.
func (c *Cluster) MetadataFor(actor string) metadata.Interface {
	return &metadataClient{client{c: c, actor: actor, meta: true}}
}

type metadataClient struct{ cl client }

var (
	_ metadata.Interface = (*metadataClient)(nil)
	_ metadata.Getter    = (*metadataResource)(nil)
)

func (m *metadataClient) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	cl := m.cl
	return &metadataResource{r: &resource{client: &cl, gvr: gvr}}
}

// metadataResource is a resource's dynamic client with its answers cut to
// metadata.
type metadataResource struct{ r *resource }

func (m *metadataResource) Namespace(ns string) metadata.ResourceInterface {
	r := *m.r
	r.ns = ns
	return &metadataResource{r: &r}
}

// partialOf returns the metadata of u, as the API server answers a client
// that asks for PartialObjectMetadata.
func partialOf(u *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}}
	md, _ := u.Object["metadata"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &out.ObjectMeta); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

func (m *metadataResource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*metav1.PartialObjectMetadata, error) {
	u, err := m.r.Get(ctx, name, opts, sub...)
	if err != nil {
		return nil, err
	}
	return partialOf(u)
}

func (m *metadataResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	list, err := m.r.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: list.GetResourceVersion(), Continue: list.GetContinue()},
		Items:    make([]metav1.PartialObjectMetadata, 0, len(list.Items)),
	}
	for i := range list.Items {
		p, err := partialOf(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *p)
	}
	return out, nil
}

func (m *metadataResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*metav1.PartialObjectMetadata, error) {
	u, err := m.r.Patch(ctx, name, pt, data, opts, sub...)
	if err != nil {
		return nil, err
	}
	return partialOf(u)
}

func (m *metadataResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	return m.r.Delete(ctx, name, opts, sub...)
}

func (m *metadataResource) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return m.r.DeleteCollection(ctx, opts, listOpts)
}

// Watch is not supported: it fails with MethodNotSupported.
func (m *metadataResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return m.r.Watch(ctx, opts)
}
