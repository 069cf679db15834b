// Package inventory gives operators without a set kind of their own
// (knative/operator, which applies each release in place) sets to hand off
// with: inventory sets, ConfigMaps that record which objects a generation
// of a component is made of.
//
// An inventory set is a ConfigMap in a namespace the operator picks
// ([Inventory.Namespace]), labelled with the component
// ([ComponentLabel]), the generation ([GenerationLabel]), its role and
// [SetKindLabel]. Its data holds one key per object, as
// sigs.k8s.io/cli-utils' ConfigMap inventory does:
// namespace_name_group_kind (the namespace empty for a cluster-scoped
// object, the group empty for the core group), whose value is the API
// version the object was applied at ([Entry]). It records references,
// never manifests. A generation whose entries outgrow
// [Inventory.MaxBytes] is spread over several ConfigMaps, the roles
// part-0, part-1, … of the generation ([Inventory.Generation]).
//
// Inventory sets own nothing: no object gets an ownerReference to one, so
// deleting an inventory deletes nothing by garbage collection, and the
// objects keep the owner the operator gives them (knative/operator: its
// component object, for namespaced objects). [Inventory.PruneOptions]
// (and [Inventory.Executor], which uses it) puts that owner's UID in
// [handoff.PruneOptions.Owners] and sets [handoff.PruneOptions.AnyUnowned]
// in one place, so that what only that owner owns, or nobody, counts as
// installed by the family; Owners without AnyUnowned is a configuration
// error ([handoff.ConfigError]). What a retirement left, and why, is in
// the Step's [handoff.Result] (Skipped, Deleted, HandedOver, Kept).
//
// With [Inventory.Owner] the inventory ConfigMaps are owned in turn, by
// the component object: they go with it, and a watch on them maps each
// back to it. Any component and generation name will do: one that is no
// label value is labelled in a hashed form ([LabelValue]) and kept whole
// in an annotation.
//
// A change within one generation (a namespace that moves, objects that
// come and go) updates the parts it touches in place; what an update takes
// out of a part is recorded first in ConfigMaps of the generation of their
// own (roles dropped-<hash>, chunked like the parts), which retire like an
// older generation's parts once the generation is rolled out, deleting
// what no part lists (see [Inventory.Family]).
//
// A generation applied in place over the previous one (same object names)
// is handed off in this order, one [handoff.Executor.Step] per reconcile:
//
//  1. record the new inventory: Step creates the new generation's
//     ConfigMaps beside the old ones ([handoff.Executor.Record], before the
//     apply, does only that: it retires and deletes nothing, so a failed
//     delete never keeps a new spec from being applied);
//  2. apply: the operator applies the new manifests, as it does today,
//     each stamped first with [Stamp] for the current part that lists it
//     (Stamp refuses an object the new inventory does not list);
//  3. wait for rollout: the family's [Inventory.Probe] (by default
//     handoff.RolloutProbe{Stamped: true}) reads the workloads, CRDs and
//     APIServices the new inventory lists, and Step waits until each was
//     applied for it and is rolled out;
//  4. delete what only the old inventory lists: Step retires the old
//     ConfigMaps, and the retirement deletes every object no live
//     inventory lists (keep-annotated, protected and foreign ones stay);
//  5. delete the old inventory: the retired ConfigMaps go last, once
//     their objects are settled; a delete that fails is retried by the
//     next Step, for the old inventory still lists the object.
//
// The component is removed the same way, one Step per reconcile: when
// its object is deleted (held by the operator's finalizer), the
// reconciler calls Step with no generation, Step(ctx, nil), until
// [handoff.Result].Requeue is false, and only then drops its finalizer.
// Every inventory is retired: what it lists is deleted if the component
// object or nobody owns it, but for protected kinds (Namespaces, PVCs,
// CRDs) and keep-annotated objects, which stay and lose their
// ownerReference to the component object, so the garbage collector does
// not take them when it goes; an object with any other owner stays as it
// is. The inventories go last. Result's Deleted and Skipped say what
// became of each object, and why.
//
// Usage:
//
//	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving"}
//	gen, err := inv.Generation(version, manifest.Resources())
//	exec := inv.Executor(dyn, mapper, component.GetUID()) // Family, Prune.Owners and AnyUnowned
//	res, err := exec.Record(ctx, gen.Desired) // records the inventory first; deletes nothing
//	// stamp what is about to be applied, with the family as Record left it:
//	err = inventory.Stamp(res.Family, version, objs)
//	// apply objs; then, in the same reconcile:
//	res, err = exec.Step(ctx, gen.Desired) // waits for the rollout, then retires
//
//	// the component object deleted, its finalizer still on it:
//	res, err = exec.Step(ctx, nil) // until !res.Requeue; then drop the finalizer
//
// An operator that installed releases before it recorded inventories
// records the installed one once, from proof alone: its manifests, or,
// where they are gone, [Controlled] (what the component object controls, of
// every namespaced kind served). [GenerationName] names a generation by
// its version and the identities it applies.
//
// examples/inventory in the repository is a whole operator of this shape
// (install, upgrade, removal) on package handofftest's fake cluster.
//
// To read one:
//
//	kubectl -n knative-operator get configmaps -l handoff.kube-handoff.io/inventory=knative-serving
//	kubectl -n knative-operator get configmap knative-serving-inventory-part-0-<hash> -o yaml
package inventory
