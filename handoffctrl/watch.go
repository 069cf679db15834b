package handoffctrl

import (
	"github.com/kube-handoff/handoff/inventory"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IsInventory reports whether obj is an inventory ConfigMap of package
// inventory: it carries [inventory.SetKindLabel] set to
// [inventory.SetKind]. It is a filter for the watch that reconciles a
// component object when one of its inventories changes (created, retired,
// deleted by hand), wrapped as controller-runtime's predicate:
//
//	Watches(&corev1.ConfigMap{},
//		handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &Widget{}),
//		builder.WithPredicates(predicate.NewPredicateFuncs(handoffctrl.IsInventory)))
//
// controller-runtime's handler.EnqueueRequestForOwner maps each
// inventory back to the component object by the inventory's
// ownerReferences of the component's kind, which is why this package has
// no handler of its own. Two limits hold for that mapping: it maps
// nothing for an inventory without an ownerReference to the component
// object (package inventory writes one with [inventory.Inventory.Owner],
// on an inventory recorded before at its next update), and it names the owner in the inventory's own
// namespace, as the API server does for a namespaced owner, so the
// inventories of a namespaced component object must be in its namespace
// ([inventory.Inventory.Namespace]). A cluster-scoped component object may
// own inventories in any namespace.
func IsInventory(obj client.Object) bool {
	return obj != nil && obj.GetLabels()[inventory.SetKindLabel] == inventory.SetKind
}
