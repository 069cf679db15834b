package handoff_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// API calls per scenario, counted by verb from the fake cluster's recorded
// calls of one actor, against a lower bound derived by hand from the
// protocol. Every count must be at least its bound (else the bound, or the
// protocol, is wrong) and at most its bound plus the extras named next to
// it.

var callVerbs = []string{"list", "get", "create", "update", "patch", "delete"}

type callCount map[string]int

func (c callCount) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c callCount) String() string {
	var parts []string
	for _, v := range callVerbs {
		parts = append(parts, fmt.Sprintf("%s=%d", v, c[v]))
	}
	for v, n := range c {
		if !slices.Contains(callVerbs, v) {
			parts = append(parts, fmt.Sprintf("%s=%d", v, n))
		}
	}
	return strings.Join(parts, " ")
}

// callsOf returns the calls of actor since the last ClearActions, by verb.
func callsOf(c *handofftest.Cluster, actor string) callCount {
	out := callCount{}
	for k, n := range c.Calls() {
		if k.Actor == actor && n > 0 {
			out[k.Verb] += n
		}
	}
	return out
}

type callRow struct {
	scenario string
	got      callCount
	bound    callCount
	extras   callCount
}

// check reports a verb counted below its bound or above bound + extras.
func (r callRow) check(t *testing.T) {
	t.Helper()
	verbs := slices.Clone(callVerbs)
	for v := range r.got {
		if !slices.Contains(verbs, v) {
			verbs = append(verbs, v)
		}
	}
	for _, v := range verbs {
		if r.got[v] < r.bound[v] {
			t.Errorf("%s: %d %s calls, below the lower bound %d: the bound or the protocol is wrong", r.scenario, r.got[v], v, r.bound[v])
		}
		if r.got[v] > r.bound[v]+r.extras[v] {
			t.Errorf("%s: %d %s calls, want at most %d (bound %d + extras %d)", r.scenario, r.got[v], v, r.bound[v]+r.extras[v], r.bound[v], r.extras[v])
		}
	}
}

func callsLogTable(t *testing.T, rows []callRow) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n| scenario | %s | total | lower bound | extras |\n|---|", strings.Join(callVerbs, " | "))
	for range callVerbs {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s |", r.scenario)
		for _, v := range callVerbs {
			fmt.Fprintf(&b, " %d |", r.got[v])
		}
		fmt.Fprintf(&b, " %d | %d | %d |\n", r.got.total(), r.bound.total(), r.extras.total())
	}
	t.Log(b.String())
}

// callsThreeRoles is smallComponent with a third role: the statefulset set
// lists one StatefulSet of its own. Shared between generations: shared-a,
// shared-b, the Deployment and the StatefulSet; only-<gen> is not.
func callsThreeRoles(gen string) map[string][]*unstructured.Unstructured {
	m := smallComponent(gen)
	sts := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": map[string]any{"image": gen}}}
	sts.SetNamespace("ns")
	sts.SetName("store")
	m["statefulset"] = []*unstructured.Unstructured{sts}
	return m
}

// callsFinalizeComponent has one static role of shared ConfigMaps
// shared-0..shared-<s-1> and ConfigMaps obsolete-<gen>-0..<o-1> that only
// one generation lists.
func callsFinalizeComponent(gen string, s, o int) map[string][]*unstructured.Unstructured {
	cm := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"v": gen}}}
		u.SetNamespace("ns")
		u.SetName(name)
		return u
	}
	var out []*unstructured.Unstructured
	for i := range s {
		out = append(out, cm(fmt.Sprintf("shared-%d", i)))
	}
	for i := range o {
		out = append(out, cm(fmt.Sprintf("obsolete-%s-%d", gen, i)))
	}
	return map[string][]*unstructured.Unstructured{"static": out}
}

// callsUpgrade installs v1 with roles, clears the call record and upgrades
// to v2 with Converge; it returns the executor's calls and the rounds.
func callsUpgrade(t *testing.T, roles []string, component func(string) map[string][]*unstructured.Unstructured, legacy bool) (*handofftest.World, int) {
	t.Helper()
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	v1 := w.Desire("v1", roles, component("v1"))
	v2 := w.Desire("v2", roles, component("v2"))
	if _, err := w.Converge(ctx, v1, 30); err != nil {
		t.Fatal(err)
	}
	w.Cluster.ClearActions()
	var rounds int
	var err error
	if legacy {
		rounds, err = w.ConvergeLegacy(ctx, v2, 30)
	} else {
		rounds, err = w.Converge(ctx, v2, 30)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, v2); err != nil {
		t.Fatal(err)
	}
	return w, rounds
}

// withCache gives w's executor a cache that is always current.
func withCache(w *handofftest.World) {
	w.Executor.Cache = &laggingCache{c: w.Cluster, fam: w.Family}
}

func TestCallsPerScenario(t *testing.T) {
	ctx := context.Background()
	var rows []callRow

	// Steady state. Lower bound: one List to see that nothing changed (a
	// reconcile cannot know the sets without reading them), no write.
	// No extras: the goal is exactly this.
	{
		w := handofftest.NewWorld("TektonPipeline")
		v1 := w.Desire("v1", []string{"static", "deployment"}, smallComponent("v1"))
		if _, err := w.Converge(ctx, v1, 30); err != nil {
			t.Fatal(err)
		}
		w.Cluster.ClearActions()
		if _, err := w.Executor.Step(ctx, v1); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, callRow{scenario: "steady state, one reconcile", got: callsOf(w.Cluster, "executor"),
			bound: callCount{"list": 1}})
		// With a cache (Executor.Cache): nothing to read from the API
		// server, nothing to write. Bound 0.
		withCache(w)
		w.Cluster.ClearActions()
		if _, err := w.Executor.Step(ctx, v1); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, callRow{scenario: "steady state, one reconcile, with a cache", got: callsOf(w.Cluster, "executor")})
	}

	// Upgrade of R roles, executor only, from the first reconcile that sees
	// the new generation to the one that finds nothing left to do. The
	// executor must at least:
	//   - list once per reconcile. The number of reconciles is set by the
	//     waits, not by the executor: the simulated controller makes a set
	//     Ready on its second pass, and the workload roles wait for static.
	//     1 creates static, 2 sees it not Ready yet (the controller's
	//     second pass makes it Ready), 3 creates the workload role(s),
	//     4 sees them not Ready yet, 5 finds all Ready and retires every
	//     old set (the controller's finalizer then runs and the sets are
	//     gone), 6 finds nothing to do. So 6 lists.
	//   - create each new set: R creates.
	//   - supersede each old set, so its controller stops writing what the
	//     new generation also lists: R patches.
	//   - before retiring a set, read what it lists: the resources it
	//     shares with a successor, to hand over the ones that still name
	//     the retiring set (one patch each), and those only it lists, as
	//     one that is protected or annotated keep must stop naming the set
	//     before it goes, or the garbage collector takes it. One List per
	//     scope (kind and namespace) of what a retiring set lists, once a
	//     Step: the executor cannot know the ownerReferences without
	//     reading. Here the successor's controller has already taken the
	//     shared resources over when it applied them, and nothing is kept,
	//     so no patch is due.
	//   - delete each old set: R deletes.
	// Obsolete resources are deleted by the set controller's finalizer
	// (actor controller), not counted here.
	twoRoles := []string{"static", "deployment"}
	threeRoles := []string{"static", "deployment", "statefulset"}
	{
		// S = 3: shared-a, shared-b (static), controller (deployment);
		// O = 1: the v1-only resource.
		w, rounds := callsUpgrade(t, twoRoles, smallComponent, false)
		if rounds != 6 {
			t.Errorf("two-role upgrade took %d reconciles, want 6", rounds)
		}
		// Scopes: the ConfigMaps in ns (static), the Deployments in ns
		// (deployment): 2 Lists.
		rows = append(rows, callRow{scenario: "upgrade, 2 roles (S=3)", got: callsOf(w.Cluster, "executor"),
			bound: callCount{"list": 6 + 2, "create": 2, "patch": 2, "delete": 2}})
	}
	{
		// S = 4: shared-a, shared-b, controller, store; O = 1.
		w, rounds := callsUpgrade(t, threeRoles, callsThreeRoles, false)
		if rounds != 6 {
			t.Errorf("three-role upgrade took %d reconciles, want 6", rounds)
		}
		// Scopes: ConfigMaps, Deployments and StatefulSets in ns; the
		// deployment and statefulset sets share the Deployments' List.
		rows = append(rows, callRow{scenario: "upgrade, 3 roles (S=4)", got: callsOf(w.Cluster, "executor"),
			bound: callCount{"list": 6 + 3, "create": 3, "patch": 3, "delete": 3}})
	}

	{
		// The two-role upgrade with a cache: the reconciles read the
		// family from the cache, so the 6 lists become 3, the confirming
		// Lists of the two Steps that create and of the one that retires
		// (a plan that creates or retires is never carried out on what a
		// cache says). Everything else as above.
		ctx := context.Background()
		w := handofftest.NewWorld("TektonPipeline")
		v1 := w.Desire("v1", twoRoles, smallComponent("v1"))
		v2 := w.Desire("v2", twoRoles, smallComponent("v2"))
		if _, err := w.Converge(ctx, v1, 30); err != nil {
			t.Fatal(err)
		}
		withCache(w)
		w.Cluster.ClearActions()
		rounds, err := w.Converge(ctx, v2, 30)
		if err != nil {
			t.Fatal(err)
		}
		if err := handofftest.CheckConverged(w.Cluster, w.Family, v2); err != nil {
			t.Fatal(err)
		}
		if rounds != 6 {
			t.Errorf("two-role upgrade with a cache took %d reconciles, want 6", rounds)
		}
		rows = append(rows, callRow{scenario: "upgrade, 2 roles (S=3), with a cache", got: callsOf(w.Cluster, "executor"),
			bound: callCount{"list": 3 + 2, "create": 2, "patch": 2, "delete": 2}})
	}

	// Finalization of a set listing S shared and O obsolete resources, while
	// the successor's controller has not applied anything yet (so every
	// shared resource still names the retiring set). It must at least:
	//   - list the family once, to know which sets are successors;
	//   - read what the set lists: one List per scope, here the ConfigMaps
	//     of ns: 1;
	//   - patch the handover of each shared resource: S;
	//   - list the sets again before anything goes, so that a set created
	//     while the finalizer ran keeps what it lists (the confirmation
	//     read; it reads the other families' sets too): 1.
	// The obsolete ConfigMaps are the set's alone: the garbage collector
	// deletes them once the set is gone, so no call is due for them.
	// Lower bound 3 + S; no extras.
	{
		const S, O = 5, 3
		w := handofftest.NewWorld("TektonPipeline")
		v1 := w.Desire("v1", []string{"static"}, callsFinalizeComponent("v1", S, O))
		v2 := w.Desire("v2", []string{"static"}, callsFinalizeComponent("v2", S, O))
		if _, err := w.Converge(ctx, v1, 30); err != nil {
			t.Fatal(err)
		}
		// One reconcile supersedes the v1 set and creates the v2 set.
		if _, err := w.Executor.Step(ctx, v2); err != nil {
			t.Fatal(err)
		}
		old, ok := w.Cluster.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: "TektonInstallerSet", Name: w.Family.SetName("v1", "static")})
		if !ok {
			t.Fatal("no v1 static set")
		}
		w.Cluster.ClearActions()
		res, err := w.Executor.Finalize(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.HandedOver) != S || len(res.Collected) != O {
			t.Errorf("finalize: %d handed over, %d left to the garbage collector; want %d, %d", len(res.HandedOver), len(res.Collected), S, O)
		}
		rows = append(rows, callRow{scenario: fmt.Sprintf("finalize, S=%d shared, O=%d obsolete", S, O), got: callsOf(w.Cluster, "executor"),
			bound: callCount{"list": 1 + 1 + 1, "patch": S}})
	}

	// Retirement of a generation of N resources in K kinds and S
	// namespaces over two sets, nothing owned elsewhere: the reads are K×S
	// Lists, whatever N is, and no Get. The Step that retires lists the
	// family once, then each scope once, for both sets (the second set's
	// objects are in the scopes the first one's retirement listed); the
	// successor's controller has taken everything over, so nothing is
	// written but the sets' deletes.
	{
		const N, K, S = 60, 3, 2
		scaled := func(gen string) map[string][]*unstructured.Unstructured {
			kinds := []string{"ConfigMap", "Secret", "ServiceAccount"}
			var out []*unstructured.Unstructured
			for i := range N {
				u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kinds[i%K], "metadata": map[string]any{"labels": map[string]any{"v": gen}}}}
				u.SetNamespace(fmt.Sprintf("ns-%d", (i/K)%S))
				u.SetName(fmt.Sprintf("r-%d", i))
				out = append(out, u)
			}
			return map[string][]*unstructured.Unstructured{"static-0": out[:N/2], "static-1": out[N/2:]}
		}
		w := handofftest.NewWorld("TektonPipeline")
		v1 := w.Desire("v1", []string{"static-0", "static-1"}, scaled("v1"))
		v2 := w.Desire("v2", []string{"static-0", "static-1"}, scaled("v2"))
		if _, err := w.Converge(ctx, v1, 30); err != nil {
			t.Fatal(err)
		}
		var retiring bool
		for range 30 {
			w.Cluster.ClearActions()
			res, err := w.Executor.Step(ctx, v2)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Plan.Of(handoff.ActionRetire)) > 0 {
				retiring = true
				break
			}
			if err := w.Controller.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !retiring {
			t.Fatal("no Step retired the v1 set")
		}
		rows = append(rows, callRow{scenario: fmt.Sprintf("the Step retiring N=%d in K=%d kinds × S=%d namespaces, 2 sets", N, K, S), got: callsOf(w.Cluster, "executor"),
			bound: callCount{"list": 1 + K*S, "delete": 2}})
	}

	// tektoncd/operator's flow for the same two-role upgrade (the executor
	// actor stands for the operator's MainSet). It must at least: list
	// once and delete each old set (2); list once more after its
	// controller has run the finalizers, to see them gone (in the fake
	// one controller pass removes them); then install from nothing:
	// create static, wait for it (the controller's second pass), create
	// deployment, wait, find nothing to do: 5 lists, 2 creates. Lower
	// bound: 7 lists, 2 deletes, 2 creates. No handover gets, no
	// supersede patches, but the shared resources are deleted and
	// re-created by the controller (checked below): the gap.
	{
		w, _ := callsUpgrade(t, twoRoles, smallComponent, true)
		rows = append(rows, callRow{scenario: "legacy delete-then-create, 2 roles", got: callsOf(w.Cluster, "executor"),
			bound: callCount{"list": 7, "delete": 2, "create": 2}})
		// The controller's deletes of resources: every listed resource but
		// Namespaces, PVCs and CRDs, by name, whoever owns it: all 4 of v1
		// (3 of them shared, then re-created).
		var resDeletes int
		for _, a := range w.Cluster.Actions() {
			if a.Actor == "controller" && a.GetVerb() == "delete" && a.GetResource().Resource != handofftest.SetResource.Resource {
				resDeletes++
			}
		}
		if resDeletes != 4 {
			t.Errorf("legacy: controller deleted %d resources, want 4 (3 shared + only-v1)", resDeletes)
		}
		t.Logf("legacy flow: the set controller deleted %d resources by name (3 of them shared and re-created)", resDeletes)
	}

	for _, r := range rows {
		r.check(t)
	}
	callsLogTable(t, rows)
}

// smallComponent is the component the call counts are derived for: three
// ConfigMaps (two shared, one of the generation's own) and a Deployment.
func smallComponent(gen string) map[string][]*unstructured.Unstructured {
	cm := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"v": gen}}}
		u.SetNamespace("ns")
		u.SetName(name)
		return u
	}
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"image": gen}}}
	dep.SetNamespace("ns")
	dep.SetName("controller")
	return map[string][]*unstructured.Unstructured{
		"static":     {cm("shared-a"), cm("shared-b"), cm("only-" + gen)},
		"deployment": {dep},
	}
}
