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
// [NewCluster] serves the common built-in kinds (ConfigMaps, Secrets,
// Services, Namespaces, Deployments, StatefulSets, DaemonSets, Jobs,
// RBAC, webhook configurations, APIServices, CRDs, …; its doc lists
// them); [Cluster.Register] adds any other. By default a namespaced object
// may be created in any namespace; with [RequireNamespaces] the cluster
// refuses it, as a real API server does, until its Namespace exists
// (404 NotFound) and while it is being deleted (403 Forbidden), so an
// inventory recorded before its namespace exists fails as it would on a
// real cluster.
//
// The cluster runs no controllers but the garbage collector. [Rollouts]
// plays the ones that roll out what handoff.RolloutProbe waits for: the
// deployment, statefulset, daemonset and job controllers, the
// establishing of CRDs and the availability of APIServices. Each pass
// ([Rollouts.RollOut], or [Cluster.RollOut] for everything at once)
// writes the status each kind's controller writes once its current spec
// is rolled out, as that controller's actor ([DeploymentControllerActor],
// …), so invariant checks see the writes; Hold keeps objects back (for
// good, or until the test lets them go) and Passes makes a rollout take
// several passes, showing it under way first.
//
// Watches follow the cluster's log of writes ([Cluster.Writes]): every
// change of the store, garbage collection and [Cluster.Add] included, is
// an ADDED, MODIFIED or DELETED event at the resourceVersion the write
// made, the one a later list reports. A watch starts from a
// resourceVersion (the writes after it are replayed; more than
// [WithWatchHistory] writes back, its one event is a 410 Expired ERROR, so
// a reflector lists again), from now with the objects there are, or with
// sendInitialEvents, as client-go's watch-list informers ask.
//
// [Cluster.Serve] serves the cluster over HTTP on a loopback address, so
// controller-runtime managers, client-go clientsets, informers and
// discovery point at it through [Server.Config]. Each request is a call of
// the server's actor, recorded and subject to its faults as calls through
// [Cluster.ClientFor] are; a watch is one call of verb watch.
//
// A Cluster is safe for concurrent use. Server-side apply, strategic
// merge patch and dry runs are not supported.
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
// An operator without a set kind needs no World: a Cluster with
// RequireNamespaces, its own reconciler, and a Rollouts pass after each
// reconcile; examples/inventory in the repository is one.
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
