// Package handoff upgrades a Kubernetes operator's sets of resources from
// one generation to the next with no availability gap: a readiness-gated,
// blue/green handoff for operators that install components through set
// objects, such as tektoncd/operator's TektonInstallerSets, and, through
// package inventory, for operators that have none and apply each release
// in place, such as knative/operator.
//
// The desired generation's sets are created beside the current ones under
// deterministic names (a retried create never makes a duplicate); old sets
// are retired, by name and UID, only once every desired set is Ready for its
// current spec; and when an old set is finalized, every resource a live
// successor still lists is kept and handed over to it, so neither the
// finalizer nor the garbage collector removes what is still serving.
//
// A generation is the operator's release throughout: an ID such as
// "v0.80.0" ([Desired.Generation]), carried by each set in the label
// [Family.GenerationLabel] names and read back as [Set.Generation]. It is
// never metadata.generation, the API server's count of changes to an
// object's spec, which [Rollout] and [ConditionProbe] compare with
// status.observedGeneration; package inventory's Generation type is the
// inventory of one release.
//
// The pieces:
//   - [Family] describes one component's sets and how to read them;
//     [Family.Observe] turns a set object into a [Set].
//   - [Planner.Plan] is pure: observed sets and a [Desired] generation in, a
//     [Plan] of [Action] values out, printable and comparable.
//   - [PruneOptions] say what finalizing a set may delete; the decision,
//     resource by resource, is data in [FinalizeResult] and [Result]
//     ([Item], [Verdict]): keep and hand over to the sets that still list
//     it, delete, or skip, each with its reason.
//   - [Guard] tells a set controller whether it may write a resource while
//     generations coexist, so the old one does not revert the new one.
//   - [Executor] is the only code that talks to the API server:
//     [Executor.Step] once per reconcile, [Executor.Finalize] from the set
//     controller's finalizer. Both check the executor first
//     ([Executor.Validate]): a misconfigured one fails with a
//     [*ConfigError] naming every field at fault, before any call.
//   - [ManifestivalObjects] and [NewTypedSetClient] let the executor work
//     through the clients a manifestival operator already holds (an
//     mf.Client, a client-gen typed client of its set kind);
//     [StepCondition] turns what a step returned into a status condition.
//
// Operators without set objects: package inventory records each
// generation in ConfigMaps that own nothing (inventory sets). With no set
// controller to report Ready, the family's [ObjectProbe] decides from the
// listed objects themselves: [RolloutProbe] reads the Deployments,
// StatefulSets, DaemonSets, Jobs, CRDs and APIServices a set lists
// ([Rollout] judges one), and the executor reads them with one List per
// kind and namespace after each observe. Objects the operator's component
// object owns count as the family's when its UID is in
// [PruneOptions.Owners]; with [PruneOptions.AnyUnowned], which Owners
// requires, so do unowned ones. A handoff in place is then: record the
// new inventory, apply, wait for rollout, delete what only the old
// inventory lists, delete the old inventory; the Step's [Result] says
// what each retirement deleted, kept and left, and why.
//
// The set controller's contract: put a finalizer on each set and call
// [Executor.Finalize] from it instead of deleting every listed resource by
// name; before applying a resource, ask [Guard.MayApply] (or, of the live
// object read before an update, [Guard.MayWrite]), leave the resource
// alone when it says no, and mark what it writes with [Guard.Stamp]; write
// status.observedGeneration with the Ready condition, and report Ready=False
// with reason [ReasonSuperseded] while the set carries the superseded mark.
//
// Listed resources are reached through [Objects]: [NewDynamicObjects] over
// a dynamic client and a REST mapper, which it may reset once per call on a
// kind it does not know, or an adapter over a client the operator already
// holds, such as [ManifestivalObjects]. Identity is GroupKind + namespace +
// name: a kind is "not served" ([ErrNotServed]) only when no version of it
// is, and a resource a live set lists is never skipped for that reason.
//
// An object a live set of another family of the same set kind lists, or
// last wrote, is not the family's to delete: [Executor.Finalize] keeps it,
// and [NewGuard] given that family's sets refuses to write it.
//
// Usage, in a reconciler:
//
//	res, err := exec.Step(ctx, &handoff.Desired{Generation: "v0.80.0", Roles: roles})
//	if err != nil {
//		return err
//	}
//	if res.Requeue {
//		return requeueAfter(res.Waiting)
//	}
package handoff
