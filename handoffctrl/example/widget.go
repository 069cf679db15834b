// Package example is a controller-runtime operator of the widget
// component, with no set kind of its own: a [Reconciler] of Widgets
// (example.dev/v1, a custom resource it reads as unstructured) that
// installs the release a Widget names (spec.version) in the Widget's
// namespace, in place, under the same names each time, every object owned
// by the Widget. Package inventory records each release in inventory
// ConfigMaps first, so the next release deletes what it dropped once it
// has rolled out, and the Widget's finalizer removes the release.
//
// Its test runs it through a controller-runtime manager against package
// handofftest's fake cluster over HTTP.
package example

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"

	"github.com/kube-handoff/handoff/handoffctrl"
	"github.com/kube-handoff/handoff/inventory"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// WidgetResource is the operator's custom resource, example.dev/v1
// Widget, namespaced; WidgetKind its kind.
var (
	WidgetResource = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}
	WidgetKind     = WidgetResource.GroupVersion().WithKind("Widget")
)

// Finalizer holds a Widget being deleted until its release is removed.
const Finalizer = "widgets.example.dev/finalizer"

//go:embed manifests
var manifests embed.FS

// Reconciler reconciles Widgets.
type Reconciler struct {
	// Client is the manager's client: it reads Widgets and applies
	// releases.
	Client client.Client
	// Dynamic and Mapper are the executor's: a dynamic client for the
	// manager's config and handoffctrl.NewMapper, a mapper it can reset.
	Dynamic dynamic.Interface
	Mapper  meta.ResettableRESTMapper
	// Requeue says how soon to reconcile again while a handoff waits.
	Requeue handoffctrl.Requeue
}

// NewReconciler returns a Reconciler over mgr, with the executor's
// clients made for mgr's config.
func NewReconciler(mgr ctrl.Manager) (*Reconciler, error) {
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	mapper, err := handoffctrl.NewMapper(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	return &Reconciler{Client: mgr.GetClient(), Dynamic: dyn, Mapper: mapper}, nil
}

// SetupWithManager reconciles a Widget when it changes, when its
// Deployment does (a rollout), and when one of its inventories does.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(newWidget()).
		Owns(&appsv1.Deployment{}).
		Watches(&corev1.ConfigMap{},
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), newWidget()),
			builder.WithPredicates(predicate.NewPredicateFuncs(handoffctrl.IsInventory))).
		Complete(r)
}

// Reconcile is one reconcile of a Widget: a Step of its handoff, then the
// apply of its release; or, once it is deleted, a Step of its removal.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := newWidget()
	if err := r.Client.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// One inventory per Widget, in its namespace and owned by it (so the
	// watch above maps an inventory back to it); what the Widget owns, or
	// nobody, is the inventory's to delete.
	inv := inventory.Inventory{Namespace: w.GetNamespace(), Component: "widget-" + w.GetName(), Owner: inventory.OwnerOf(w)}
	exec := inv.Executor(r.Dynamic, r.Mapper, w.GetUID())

	if !w.GetDeletionTimestamp().IsZero() {
		// Removal: retire every inventory, deleting what it lists, then
		// let the Widget go.
		if res, err := exec.Step(ctx, nil); err != nil || res.Requeue {
			return r.Requeue.Result(res, err)
		}
		controllerutil.RemoveFinalizer(w, Finalizer)
		return ctrl.Result{}, r.Client.Update(ctx, w)
	}
	if controllerutil.AddFinalizer(w, Finalizer) {
		if err := r.Client.Update(ctx, w); err != nil {
			return ctrl.Result{}, err
		}
	}

	version, _, _ := unstructured.NestedString(w.Object, "spec", "version")
	objs, err := release(version, w)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Record the release's inventory beside the previous one. Record deletes
	// nothing, so nothing keeps the new release from being applied.
	gen, err := inv.Generation(version, objs)
	if err != nil {
		return ctrl.Result{}, err
	}
	res, err := exec.Record(ctx, gen.Desired)
	if err != nil {
		return r.Requeue.Result(res, err)
	}
	// Apply in place, each object stamped for the inventory that lists it
	// (its rollout counts once applied for it), as Record left them.
	if err := inventory.Stamp(res.Family, version, objs); err != nil {
		return ctrl.Result{}, err
	}
	for i := range objs {
		if err := r.apply(ctx, &objs[i]); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Step: it waits for the rollout of what was applied, then deletes what
	// only the previous inventory lists, then the previous inventory.
	res, err = exec.Step(ctx, gen.Desired)
	return r.Requeue.Result(res, err)
}

// apply creates obj, or updates the live object to it.
func (r *Reconciler) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)
	switch {
	case apierrors.IsNotFound(err):
		return r.Client.Create(ctx, obj)
	case err != nil:
		return err
	}
	obj.SetResourceVersion(live.GetResourceVersion())
	return r.Client.Update(ctx, obj)
}

// release reads the manifests of a release, each put in the Widget's
// namespace with the Widget as its controller.
func release(version string, w *unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	data, err := manifests.ReadFile("manifests/" + version + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("widget %s/%s: release %q: %w", w.GetNamespace(), w.GetName(), version, err)
	}
	var objs []unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("widget %s/%s: release %q: %w", w.GetNamespace(), w.GetName(), version, err)
		}
		if obj.Object == nil {
			continue
		}
		obj.SetNamespace(w.GetNamespace())
		obj.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(w, WidgetKind)})
		objs = append(objs, obj)
	}
}

func newWidget() *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(WidgetKind)
	return w
}
