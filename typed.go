package handoff

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// TypedClient is the part of a client-gen typed client of a cluster-scoped
// kind that [NewTypedSetClient] adapts: Obj is the object pointer type and
// List the list pointer type, such as *v1alpha1.TektonInstallerSet and
// *v1alpha1.TektonInstallerSetList for tektoncd/operator's generated
// TektonInstallerSetInterface.
type TypedClient[Obj, List runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (List, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (Obj, error)
	Create(ctx context.Context, obj Obj, opts metav1.CreateOptions) (Obj, error)
	Update(ctx context.Context, obj Obj, opts metav1.UpdateOptions) (Obj, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (Obj, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// NewTypedSetClient adapts a client-gen typed client to [SetClient], so an
// operator that holds only its generated clientset can run the
// [Executor]. Objects are converted with runtime.DefaultUnstructuredConverter;
// apiVersion and kind, which typed objects returned by a client usually
// lack, are filled with gvk (the set kind) on everything it returns.
// Subresources are not supported, except on Patch, which passes them on.
//
// O is the object struct type, so the adapter can allocate one; with
// tektoncd/operator's clientset:
//
//	sets := handoff.NewTypedSetClient[v1alpha1.TektonInstallerSet](
//		clientset.OperatorV1alpha1().TektonInstallerSets(),
//		v1alpha1.SchemeGroupVersion.WithKind("TektonInstallerSet"))
func NewTypedSetClient[O any, Obj interface {
	*O
	runtime.Object
}, List runtime.Object](c TypedClient[Obj, List], gvk schema.GroupVersionKind) SetClient {
	return &typedSetClient[O, Obj, List]{c: c, gvk: gvk}
}

type typedSetClient[O any, Obj interface {
	*O
	runtime.Object
}, List runtime.Object] struct {
	c   TypedClient[Obj, List]
	gvk schema.GroupVersionKind
}

var _ SetClient = (*typedSetClient[metav1.PartialObjectMetadata, *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList])(nil)

func (t *typedSetClient[O, Obj, List]) toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" {
		u.SetGroupVersionKind(t.gvk)
	}
	return u, nil
}

func (t *typedSetClient[O, Obj, List]) fromUnstructured(u *unstructured.Unstructured) (Obj, error) {
	obj := Obj(new(O))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, fmt.Errorf("%s %q: convert to %T: %w", t.gvk.Kind, u.GetName(), obj, err)
	}
	return obj, nil
}

// result converts what the typed client returned.
func (t *typedSetClient[O, Obj, List]) result(name string, obj Obj, err error) (*unstructured.Unstructured, error) {
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("%s %q: typed client returned no object and no error", t.gvk.Kind, name)
	}
	u, err := t.toUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("%s %q: convert to unstructured: %w", t.gvk.Kind, name, err)
	}
	return u, nil
}

func (t *typedSetClient[O, Obj, List]) noSubresources(name string, subresources []string) error {
	if len(subresources) > 0 {
		return fmt.Errorf("%s %q: subresources %v not supported by the typed set client", t.gvk.Kind, name, subresources)
	}
	return nil
}

func (t *typedSetClient[O, Obj, List]) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	list, err := t.c.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(list)
	if err != nil {
		return nil, fmt.Errorf("list %s: convert to unstructured: %w", t.gvk.Kind, err)
	}
	out := &unstructured.UnstructuredList{}
	if md, ok := m["metadata"].(map[string]any); ok {
		out.Object = map[string]any{"metadata": md}
	}
	out.SetAPIVersion(t.gvk.GroupVersion().String())
	out.SetKind(t.gvk.Kind + "List")
	items, _ := m["items"].([]any)
	for i, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("list %s: item %d is %T, not an object", t.gvk.Kind, i, it)
		}
		u := unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" {
			u.SetGroupVersionKind(t.gvk)
		}
		out.Items = append(out.Items, u)
	}
	return out, nil
}

func (t *typedSetClient[O, Obj, List]) Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := t.noSubresources(name, subresources); err != nil {
		return nil, err
	}
	obj, err := t.c.Get(ctx, name, opts)
	return t.result(name, obj, err)
}

func (t *typedSetClient[O, Obj, List]) Create(ctx context.Context, u *unstructured.Unstructured, opts metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := t.noSubresources(u.GetName(), subresources); err != nil {
		return nil, err
	}
	obj, err := t.fromUnstructured(u)
	if err != nil {
		return nil, err
	}
	made, err := t.c.Create(ctx, obj, opts)
	return t.result(u.GetName(), made, err)
}

func (t *typedSetClient[O, Obj, List]) Update(ctx context.Context, u *unstructured.Unstructured, opts metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error) {
	if err := t.noSubresources(u.GetName(), subresources); err != nil {
		return nil, err
	}
	obj, err := t.fromUnstructured(u)
	if err != nil {
		return nil, err
	}
	done, err := t.c.Update(ctx, obj, opts)
	return t.result(u.GetName(), done, err)
}

func (t *typedSetClient[O, Obj, List]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error) {
	obj, err := t.c.Patch(ctx, name, pt, data, opts, subresources...)
	return t.result(name, obj, err)
}

func (t *typedSetClient[O, Obj, List]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, subresources ...string) error {
	if err := t.noSubresources(name, subresources); err != nil {
		return err
	}
	return t.c.Delete(ctx, name, opts)
}
