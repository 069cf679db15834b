package handofftest

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// MetadataFor returns a metadata client (client-go's [metadata.Interface],
// what handoff's Executor.Metadata takes) whose calls and writes are
// attributed to actor, as [Cluster.ClientFor]'s are: [MetadataOver] a
// dynamic client of actor whose [Call] and [Action] have Metadata set, so
// a [FaultFunc] can fail metadata calls alone. Each call is one call of
// its verb, counted in [Cluster.Calls] with the dynamic clients'.
func (c *Cluster) MetadataFor(actor string) metadata.Interface {
	return MetadataOver(&client{c: c, actor: actor, meta: true})
}

// MetadataOver returns a metadata client over a dynamic client: each call
// is one call of dyn (its actor, its faults, whatever a wrapper of it
// checks), answered as the API server answers a client that asks for
// PartialObjectMetadata: apiVersion meta.k8s.io/v1, kind
// PartialObjectMetadata and the object's metadata, nothing else.
func MetadataOver(dyn dynamic.Interface) metadata.Interface { return metadataClient{dyn: dyn} }

type metadataClient struct{ dyn dynamic.Interface }

var (
	_ metadata.Interface = metadataClient{}
	_ metadata.Getter    = metadataResource{}
)

func (m metadataClient) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	nri := m.dyn.Resource(gvr)
	return metadataResource{ri: nri, nri: nri}
}

// metadataResource is a resource's dynamic client with its answers cut to
// metadata.
type metadataResource struct {
	ri  dynamic.ResourceInterface
	nri dynamic.NamespaceableResourceInterface // nil once namespaced
}

func (m metadataResource) Namespace(ns string) metadata.ResourceInterface {
	return metadataResource{ri: m.nri.Namespace(ns)}
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

func (m metadataResource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*metav1.PartialObjectMetadata, error) {
	u, err := m.ri.Get(ctx, name, opts, sub...)
	if err != nil {
		return nil, err
	}
	return partialOf(u)
}

func (m metadataResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	list, err := m.ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return partialListOf(list)
}

// partialListOf returns the metadata of a list's items, as the API server
// answers a client that asks for PartialObjectMetadataList.
func partialListOf(list *unstructured.UnstructuredList) (*metav1.PartialObjectMetadataList, error) {
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

func (m metadataResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*metav1.PartialObjectMetadata, error) {
	u, err := m.ri.Patch(ctx, name, pt, data, opts, sub...)
	if err != nil {
		return nil, err
	}
	return partialOf(u)
}

func (m metadataResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	return m.ri.Delete(ctx, name, opts, sub...)
}

func (m metadataResource) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return m.ri.DeleteCollection(ctx, opts, listOpts)
}

// Watch watches the resource through the dynamic client, each event's
// object cut to its metadata.
func (m metadataResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := m.ri.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return convertWatch(w, partialEvent), nil
}

// partialEvent cuts the object of a watch event to its metadata; an ERROR
// event's Status stays as it is.
func partialEvent(ev watch.Event) watch.Event {
	if u, ok := ev.Object.(*unstructured.Unstructured); ok {
		p, err := partialOf(u)
		if err != nil {
			status := apierrors.NewInternalError(err).ErrStatus
			return watch.Event{Type: watch.Error, Object: &status}
		}
		ev.Object = p
	}
	return ev
}

// convertedWatch passes on the events of a watch through a function. Unlike
// watch.Filter's, its goroutine ends on Stop even while nobody reads.
type convertedWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func convertWatch(in watch.Interface, f func(watch.Event) watch.Event) watch.Interface {
	cw := &convertedWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(cw.out)
		defer in.Stop()
		for {
			select {
			case ev, ok := <-in.ResultChan():
				if !ok {
					return
				}
				select {
				case cw.out <- f(ev):
				case <-cw.stop:
					return
				}
			case <-cw.stop:
				return
			}
		}
	}()
	return cw
}

func (cw *convertedWatch) ResultChan() <-chan watch.Event { return cw.out }

func (cw *convertedWatch) Stop() { cw.once.Do(func() { close(cw.stop) }) }
