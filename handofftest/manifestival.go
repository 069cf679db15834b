package handofftest

import (
	"context"

	mf "github.com/manifestival/manifestival"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// ManifestivalClient returns a manifestival client (mf.Client) over a
// dynamic client and a REST mapper, built as manifestival/client-go-client
// builds its own: each call maps the object's kind with
// mapper.RESTMapping(group and kind, the object's version), so an object
// addressed at a version the mapper does not know, served or not, fails
// with a NoMatch error ([meta.IsNoMatchError]) and an empty version gets
// the preferred one. Give it [Cluster.Mapper] for a client that discovers
// on a miss, as client-go-client's does. Delete ignores NotFound unless
// told mf.IgnoreNotFound(false), as manifestival's options say.
func ManifestivalClient(client dynamic.Interface, mapper meta.RESTMapper) mf.Client {
	return &mfClient{client: client, mapper: mapper}
}

type mfClient struct {
	client dynamic.Interface
	mapper meta.RESTMapper
}

var _ mf.Client = (*mfClient)(nil)

// mf.Client takes no context: calls run with context.Background.

func (c *mfClient) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.client.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return c.client.Resource(m.Resource), nil
}

func (c *mfClient) Create(obj *unstructured.Unstructured, options ...mf.ApplyOption) error {
	ri, err := c.resource(obj)
	if err != nil {
		return err
	}
	_, err = ri.Create(context.Background(), obj, *mf.ApplyWith(options).ForCreate)
	return err
}

func (c *mfClient) Update(obj *unstructured.Unstructured, options ...mf.ApplyOption) error {
	ri, err := c.resource(obj)
	if err != nil {
		return err
	}
	_, err = ri.Update(context.Background(), obj, *mf.ApplyWith(options).ForUpdate)
	return err
}

func (c *mfClient) Delete(obj *unstructured.Unstructured, options ...mf.DeleteOption) error {
	ri, err := c.resource(obj)
	if err != nil {
		return err
	}
	opts := mf.DeleteWith(options)
	err = ri.Delete(context.Background(), obj.GetName(), *opts.ForDelete)
	if apierrors.IsNotFound(err) && opts.IgnoreNotFound {
		return nil
	}
	return err
}

func (c *mfClient) Get(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := c.resource(obj)
	if err != nil {
		return nil, err
	}
	return ri.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
}
