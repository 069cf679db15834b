package handofftest

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file holds the API-server semantics of gets and lists. Every function
// here runs with c.mu held.

func (c *Cluster) get(gvr schema.GroupVersionResource, ns, name string, sub []string) (*unstructured.Unstructured, error) {
	k, err := c.resolve(gvr, ns, false)
	if err != nil {
		return nil, err
	}
	if err := subresourceError(gvr.GroupResource(), name, sub, true); err != nil {
		return nil, err
	}
	obj, ok := c.objects[k.key(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return as(k, obj.DeepCopy()), nil
}

// selected returns the keys of the objects of kind k in ns (all
// namespaces when empty) that match the list options, sorted.
func (c *Cluster) selected(k kindInfo, ns string, opts metav1.ListOptions) ([]Key, error) {
	ls, fs, err := listSelectors(opts)
	if err != nil {
		return nil, err
	}
	var keys []Key
	for _, key := range c.sortedKeys() {
		if key.Group != k.gvr.Group || key.Kind != k.kind || (ns != "" && key.Namespace != ns) {
			continue
		}
		obj := c.objects[key]
		if !ls.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		if !fs.Matches(fields.Set{"metadata.name": key.Name, "metadata.namespace": key.Namespace}) {
			continue
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// listSelectors parses the selectors of a list or watch; the field
// selector may name metadata.name and metadata.namespace.
func listSelectors(opts metav1.ListOptions) (labels.Selector, fields.Selector, error) {
	ls, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	fs, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	for _, r := range fs.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
		}
	}
	return ls, fs, nil
}

func (c *Cluster) list(gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	k, err := c.resolve(gvr, ns, true)
	if err != nil {
		return nil, err
	}
	keys, err := c.selected(k, ns, opts)
	if err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion(gvr.GroupVersion().String())
	list.SetKind(k.kind + "List")
	list.SetResourceVersion(fmt.Sprint(c.rv))
	for _, key := range keys {
		list.Items = append(list.Items, *as(k, c.objects[key].DeepCopy()))
	}
	return list, nil
}
