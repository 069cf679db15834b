package handoffctrl_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff/handoffctrl"
	"github.com/kube-handoff/handoff/inventory"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Widget"}

// configMap is a ConfigMap in ns with labels and owners.
func configMap(ns string, labels map[string]string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widget-demo-inventory-part-0-abc", Labels: labels, OwnerReferences: owners}}
}

func widgetRef(name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: widgetGVK.GroupVersion().String(), Kind: widgetGVK.Kind, Name: name, UID: types.UID("uid-" + name), Controller: &controller}
}

func TestIsInventory(t *testing.T) {
	invLabels := map[string]string{inventory.SetKindLabel: inventory.SetKind, inventory.ComponentLabel: "widget-demo"}
	tests := map[string]struct {
		obj  *corev1.ConfigMap
		want bool
	}{
		"an inventory ConfigMap":                      {obj: configMap("widgets", invLabels), want: true},
		"a ConfigMap without labels":                  {obj: configMap("widgets", nil)},
		"a ConfigMap of the component label alone":    {obj: configMap("widgets", map[string]string{inventory.ComponentLabel: "widget-demo"})},
		"a ConfigMap whose set-kind label is another": {obj: configMap("widgets", map[string]string{inventory.SetKindLabel: "other"})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := handoffctrl.IsInventory(tc.obj); got != tc.want {
				t.Errorf("IsInventory = %v, want %v", got, tc.want)
			}
			p := predicate.NewPredicateFuncs(handoffctrl.IsInventory)
			if got := p.Create(event.CreateEvent{Object: tc.obj}); got != tc.want {
				t.Errorf("as a predicate, Create = %v, want %v", got, tc.want)
			}
		})
	}
}

// The documented watch: controller-runtime's EnqueueRequestForOwner maps
// an inventory ConfigMap to the reconcile request of the component object
// its ownerReferences name, in the inventory's namespace.
func TestInventoryOwnerMapping(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widgetGVK, meta.RESTScopeNamespace)
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(widgetGVK)
	h := handler.EnqueueRequestForOwner(runtime.NewScheme(), mapper, owner)
	invLabels := map[string]string{inventory.SetKindLabel: inventory.SetKind, inventory.ComponentLabel: "widget-demo"}

	tests := map[string]struct {
		obj  *corev1.ConfigMap
		want []reconcile.Request
	}{
		"an inventory owned by its Widget maps to the Widget": {
			obj:  configMap("widgets", invLabels, widgetRef("demo", false)),
			want: []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "widgets", Name: "demo"}}},
		},
		"a controller ownerReference maps as well": {
			obj:  configMap("widgets", invLabels, widgetRef("demo", true)),
			want: []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "widgets", Name: "demo"}}},
		},
		"an inventory with no ownerReference maps to nothing": {
			obj: configMap("widgets", invLabels),
		},
		"an ownerReference of another kind maps to nothing": {
			obj: configMap("widgets", invLabels, metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "widgets", UID: "uid-ns"}),
		},
		"an inventory in another namespace names the owner in its own namespace": {
			obj:  configMap("widget-operator", invLabels, widgetRef("demo", false)),
			want: []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "widget-operator", Name: "demo"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := workqueue.NewRateLimitingQueue(workqueue.DefaultControllerRateLimiter())
			defer q.ShutDown()
			h.Create(context.Background(), event.CreateEvent{Object: tc.obj}, q)
			var got []reconcile.Request
			for q.Len() > 0 {
				item, _ := q.Get()
				got = append(got, item.(reconcile.Request))
				q.Done(item)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("requests (-want +got):\n%s", d)
			}
		})
	}
}
