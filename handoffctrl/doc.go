// Package handoffctrl fits package handoff to operators built on
// sigs.k8s.io/controller-runtime, in a module of its own so that the
// library does not depend on controller-runtime.
//
// It holds three small pieces:
//
//   - [Result] and [Requeue.Result] turn what [handoff.Executor.Step]
//     returned into a reconciler's ctrl.Result and error;
//   - [NewMapper] makes the REST mapper the executor needs, one it can
//     reset, so that a kind the cluster stopped serving cannot wedge an
//     upgrade or a removal (the manager's own mapper cannot be reset);
//   - [IsInventory] selects the inventory ConfigMaps of package
//     inventory, for the watch that maps each back to its component
//     object.
//
// Wiring, in a reconciler of a component object with package inventory:
//
//	mapper, err := handoffctrl.NewMapper(mgr.GetConfig())
//	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
//	// in Reconcile:
//	inv := inventory.Inventory{Namespace: obj.Namespace, Component: "widget-" + obj.Name}
//	exec := inv.Executor(dyn, mapper, obj.UID)
//	if !obj.DeletionTimestamp.IsZero() {
//		if res, err := exec.Step(ctx, nil); err != nil || res.Requeue {
//			return handoffctrl.Result(res, err)
//		}
//		// settled: drop the finalizer
//	}
//	gen, err := inv.Generation(version, manifests)
//	exec.Build = gen.Build
//	res, err := exec.Step(ctx, gen.Desired)
//	if err == nil {
//		// stamp the release (inventory.Stamp) and apply it
//	}
//	return handoffctrl.Requeue{After: 30 * time.Second}.Result(res, err)
//
// and, to reconcile the component object when one of its inventories
// changes:
//
//	ctrl.NewControllerManagedBy(mgr).For(&Widget{}).
//		Watches(&corev1.ConfigMap{},
//			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &Widget{}),
//			builder.WithPredicates(predicate.NewPredicateFuncs(handoffctrl.IsInventory))).
//		Complete(r)
//
// The directory example holds a whole operator of this shape, run by a
// manager against package handofftest's fake cluster.
package handoffctrl
