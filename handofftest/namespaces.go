package handofftest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// admitNamespace is the NamespaceLifecycle admission of a create, with
// [RequireNamespaces]: a namespaced object needs its Namespace stored and
// not being deleted. It runs with c.mu held, before a generated name is
// made, as the real admission does.
func (c *Cluster) admitNamespace(k kindInfo, obj *unstructured.Unstructured) error {
	if !c.requireNS || !k.namespaced {
		return nil
	}
	name := obj.GetNamespace()
	ns, ok := c.objects[Key{Kind: "Namespace", Name: name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	if ns.GetDeletionTimestamp() == nil {
		return nil
	}
	// As admission.NewForbidden names the object: its name, else its
	// generateName, else "Unknown".
	what := obj.GetName()
	if what == "" {
		what = obj.GetGenerateName()
	}
	if what == "" {
		what = "Unknown"
	}
	err := apierrors.NewForbidden(k.gvr.GroupResource(), what,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", name))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", name),
		Field:   "metadata.namespace",
	})
	return err
}
