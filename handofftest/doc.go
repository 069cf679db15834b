// Package handofftest is a test kit for code built on package handoff: a
// fake cluster with the API-server semantics that
// k8s.io/client-go/dynamic/fake lacks, which records what happens to
// every object and injects faults.
//
// A [Cluster] hands out real [k8s.io/client-go/dynamic.Interface] clients
// ([Cluster.Dynamic], [Cluster.ClientFor]) and
// [k8s.io/client-go/metadata.Interface] clients ([Cluster.MetadataFor],
// for handoff's Executor.Metadata) that library code uses unchanged.
// Writes through them behave like a real API server: UIDs,
// creationTimestamp, generation and resourceVersion are assigned;
// conflicting resourceVersions, changed UIDs and failed delete
// preconditions are refused; generateName gets a random suffix; status is
// written only through the status subresource; objects over the API
// server's size limits are refused (annotations over 256 KiB and a
// ConfigMap's or Secret's data over 1 MiB with 422 Invalid, an object over
// etcd's 1.5 MiB with 413, see [MaxObjectBytes]); finalizers hold objects
// in deletion; Background, Foreground and Orphan propagation and the garbage
// collection of dependents follow ownerReferences ([Cluster.CollectGarbage]).
//
// Time is a fake clock ([Cluster.Now]) that advances one step per API
// call, so runs are reproducible. The cluster records the lifetime of
// every object ([Cluster.Timeline]), every change of state with the actor
// that made it ([Cluster.Writes]) and every call ([Cluster.Actions],
// [Cluster.Calls]), which is what invariant checkers need. Faults
// ([Cluster.InjectFaults], [FailNth], [RandomFaults]) fail calls before
// they take effect or lose their response after.
//
// [Cluster.Mapper] is a REST mapper that stays current as kinds are
// registered; [Cluster.CachedMapper] keeps the kinds of its first use until
// reset, as client-go's DeferredDiscoveryRESTMapper over a memory cache
// does, for stale-mapper tests. A kind can be served at several API
// versions ([Cluster.AddVersion]) and stop being served at one or all
// ([Cluster.Unregister]: an API version removed by an upgrade, a CRD
// deleted). [ManifestivalClient] is a manifestival client over the
// cluster that maps kinds as manifestival/client-go-client does.
//
// A Cluster is safe for concurrent use. Watches, server-side apply,
// strategic merge patch and dry runs are not supported.
//
// On top of the cluster: [World] holds one family of sets, the library's
// executor and a [SetController] that keeps the set-controller contract
// (the coexistence guard and writer mark, Ready=False while superseded,
// Finalize from a finalizer), with the family set in one place
// ([World.SetFamily]); [Catalog] builds the sets of each generation and
// role ([Catalog.DesireHashed] for updates in place); [Gate],
// [CheckConverged] and [Cluster.Gaps] check the invariants I1 to I5, for a
// family of a set kind and for one of package inventory's alike (its
// readiness read from the objects it lists, as the executor reads it).
//
// Typical use:
//
//	c := handofftest.NewCluster()
//	c.Register(setGVR, "TektonInstallerSet", false)
//	c.InjectFaults(handofftest.FailNth(3, handofftest.AfterCommit, nil), "executor")
//	runExecutor(ctx, c.ClientFor("executor"))
//	for _, w := range c.Writes() {
//		t.Log(w)
//	}
package handofftest
