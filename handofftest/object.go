package handofftest

import (
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Object builds a manifest: apiVersion and kind, the top-level fields of
// body (spec, data, rules, …), name, namespace (empty for cluster-scoped
// kinds) and a copy of labels.
func Object(apiVersion, kind, namespace, name string, labels map[string]string, body map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range body {
		u.Object[k] = v
	}
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	u.SetLabels(maps.Clone(labels))
	return u
}
