package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kube-handoff/handoff/inventory"
	mf "github.com/manifestival/manifestival"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// This file is the widget operator: what an operator without a set kind
// writes. Its custom resource, a Widget, says which release of the widget
// component to run (spec.version); the operator applies that release in
// place, under the same names each time, namespaced objects owned by the
// Widget, and records each release in an inventory first so that the
// next one deletes what it dropped, once it has rolled out.

// widgets is the operator's custom resource, example.dev/v1 Widget.
var widgets = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}

const (
	// finalizer holds a Widget being deleted until its release is removed.
	finalizer = "widgets.example.dev/finalizer"
	// operatorNS is the operator's own namespace, where it keeps the
	// inventories of every Widget.
	operatorNS = "widget-operator"
)

//go:embed manifests
var manifests embed.FS

// operator reconciles Widgets.
type operator struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	apply  mf.Client // manifestival's client over dyn
}

// reconcile is one reconcile of the Widget namespace/name. It reports
// whether to reconcile again later (a real operator requeues after a
// while; the library never sleeps).
func (o *operator) reconcile(ctx context.Context, namespace, name string) (requeue bool, err error) {
	cr, err := o.dyn.Resource(widgets).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// One inventory per Widget; what the Widget owns, or nobody, is the
	// inventory's to delete.
	inv := inventory.Inventory{Namespace: operatorNS, Component: "widget-" + name}
	exec := inv.Executor(o.dyn, o.mapper, cr.GetUID())

	if cr.GetDeletionTimestamp() != nil {
		// Removal: retire every inventory, deleting what it lists (but
		// protected, keep-annotated and foreign objects), then let the
		// Widget go.
		res, err := exec.Step(ctx, nil)
		if err != nil || res.Requeue {
			return true, err
		}
		_, err = o.setFinalizers(ctx, cr, slices.DeleteFunc(cr.GetFinalizers(), func(f string) bool { return f == finalizer }))
		return false, err
	}
	if !slices.Contains(cr.GetFinalizers(), finalizer) {
		if cr, err = o.setFinalizers(ctx, cr, append(cr.GetFinalizers(), finalizer)); err != nil {
			return false, err
		}
	}

	version, _, _ := unstructured.NestedString(cr.Object, "spec", "version")
	release, err := o.load(version, namespace)
	if err != nil {
		return false, err
	}
	// 1. Record the release's inventory, beside the previous one. Record
	// deletes nothing, so nothing keeps the new release from being applied.
	gen, err := inv.Generation(version, release.Resources())
	if err != nil {
		return false, err
	}
	res, err := exec.Record(ctx, gen.Desired)
	if err != nil {
		return true, err
	}
	// 2. Apply in place, each object stamped for the inventory that lists
	// it (the rollout counts once applied for it; res.Family is the
	// inventories as Record left them) and owned by the Widget.
	stamped, err := release.Transform(inventory.Stamper(res.Family, version), ownedBy(cr))
	if err != nil {
		return true, err
	}
	if err := stamped.Apply(); err != nil {
		return true, err
	}
	// 3. Step: it waits for the rollout of what was applied, then deletes
	// what only the previous inventory lists, then the previous inventory.
	res, err = exec.Step(ctx, gen.Desired)
	if err != nil {
		return true, err
	}
	return res.Requeue, nil
}

// load reads the manifests of a release, its namespaced objects put in
// namespace.
func (o *operator) load(version, namespace string) (mf.Manifest, error) {
	data, err := manifests.ReadFile("manifests/" + version + ".yaml")
	if err != nil {
		return mf.Manifest{}, fmt.Errorf("release %q: %w", version, err)
	}
	m, err := mf.ManifestFrom(mf.Reader(bytes.NewReader(data)), mf.UseClient(o.apply))
	if err != nil {
		return mf.Manifest{}, err
	}
	return m.Transform(mf.InjectNamespace(namespace))
}

// ownedBy makes the Widget the controller of every namespaced object;
// cluster-scoped ones (the webhook configuration) cannot have a
// namespaced owner.
func ownedBy(cr *unstructured.Unstructured) mf.Transformer {
	return func(u *unstructured.Unstructured) error {
		if u.GetNamespace() != "" {
			u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(cr, cr.GroupVersionKind())})
		}
		return nil
	}
}

// setFinalizers writes the Widget's finalizers, on the version read.
func (o *operator) setFinalizers(ctx context.Context, cr *unstructured.Unstructured, finalizers []string) (*unstructured.Unstructured, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": cr.GetResourceVersion()}})
	if err != nil {
		return nil, err
	}
	return o.dyn.Resource(widgets).Namespace(cr.GetNamespace()).Patch(ctx, cr.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
}
