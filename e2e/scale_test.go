//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/dynamic/dynamiclister"
	"k8s.io/client-go/tools/cache"
)

// Environment variables that narrow BenchmarkScale, e.g. for CI.
const (
	// scaleSizesEnv lists the component sizes, comma-separated; unset
	// means 100,1000,5000.
	scaleSizesEnv = "HANDOFF_SCALE_SIZES"
	// scaleFlowsEnv lists the flows, comma-separated, of handoff (the
	// executor reading sets from the API server), cache (reading them
	// from a dynamic informer's lister) and legacy (tektoncd/operator's
	// delete-then-create); unset means all three.
	scaleFlowsEnv = "HANDOFF_SCALE_FLOWS"
)

// setChunk is the most resources one set lists: a set of 500 is about
// 250 KB, like tektoncd/operator's pipelines sets, and etcd stores at most
// 1.5 MiB per object, so a component of 5 000 resources takes 11 sets.
const setChunk = 500

// BenchmarkScale upgrades a component of 100, 1 000 and 5 000 resources
// from generation v1 to v2 on the real control plane, once per flow, and
// reports what the component reconciler did during the upgrade:
//
//   - ns/op: wall time of its own calls, excluding readiness waits: the sum
//     of the executor's Step calls (for legacy, also its Deletes of the
//     old sets), each timed alone; the rounds in which the set controller
//     works and Deployments become Available are not timed;
//   - list/op … delete/op, read-MB/op: its API calls by verb and the
//     response bytes it read, counted by a RoundTripper around its
//     client's transport (the cache flow's informer is counted apart, in
//     informer-MB/op);
//   - heap-MB: the most its calls grew the heap, from runtime/metrics
//     sampled every millisecond during each call after a GC (see
//     heapPeak); B/op and allocs/op are what the timed calls allocated;
//   - fin-*/op: the calls of the set controller's finalizer (Finalize, or
//     legacy's delete of every listed resource by name);
//   - gap-ms and absent: the longest time a resource both generations
//     list was missing, and how many were ever missing. For legacy, from
//     the watch monitor; for the handoff, every shared resource keeps its
//     UID through the upgrade (an absence means a delete, and a re-created
//     object has a new UID), which the benchmark checks;
//   - upgrade-s: the whole upgrade, readiness waits and set controller
//     included.
//
// The executor steps only when the plan its sets give has changed since
// its last Step (as an operator reconciles on a watch event of a set);
// between Steps the set controller runs in lockstep, so nothing else in
// the test binary allocates during a timed call. Clients have no
// client-side rate limit.
//
// Run it with hack/e2e.sh, without the race detector and one iteration:
//
//	E2E_PKGS=./e2e/ bash hack/e2e.sh -race=false -run '^$' -bench Scale -benchtime 1x -v
func BenchmarkScale(b *testing.B) {
	sizes := scaleList(b, scaleSizesEnv, "100,1000,5000")
	flows := scaleList(b, scaleFlowsEnv, "handoff,cache,legacy")
	var (
		mu   sync.Mutex
		rows []string
	)
	for _, n := range sizes {
		for _, flow := range flows {
			b.Run(fmt.Sprintf("n=%s/%s", n, flow), func(b *testing.B) {
				b.StopTimer()
				b.ReportAllocs()
				size, err := strconv.Atoi(n)
				if err != nil || size < 2 {
					b.Fatalf("%s: size %q is not a number of at least 2", scaleSizesEnv, n)
				}
				var sum scaleResult
				for i := range b.N {
					sum = sum.add(runScale(b, flow, size, i))
				}
				sum.report(b)
				mu.Lock()
				rows = append(rows, fmt.Sprintf("%-6d %-8s %s", size, flow, sum.summary(b.N)))
				mu.Unlock()
			})
		}
	}
	for _, r := range rows {
		b.Log(r)
	}
}

func scaleList(b *testing.B, env, def string) []string {
	v := os.Getenv(env)
	if v == "" {
		v = def
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		b.Fatalf("%s=%q names nothing", env, v)
	}
	return out
}

// scaleResult is what one flow's upgrade took.
type scaleResult struct {
	exec, fin apiCount
	informer  int64 // bytes the cache flow's informer read
	took      time.Duration
	heap      uint64
	steps     int
	gap       time.Duration
	absent    int
	upgrade   time.Duration
}

func (r scaleResult) add(o scaleResult) scaleResult {
	return scaleResult{exec: r.exec.add(o.exec), fin: r.fin.add(o.fin), informer: r.informer + o.informer,
		took: r.took + o.took, heap: max(r.heap, o.heap), steps: r.steps + o.steps,
		gap: max(r.gap, o.gap), absent: r.absent + o.absent, upgrade: r.upgrade + o.upgrade}
}

var scaleVerbs = []string{"list", "get", "create", "update", "patch", "delete"}

func (r scaleResult) report(b *testing.B) {
	per := func(v float64) float64 { return v / float64(b.N) }
	for _, v := range scaleVerbs {
		b.ReportMetric(per(float64(r.exec.calls[v])), v+"/op")
	}
	b.ReportMetric(per(float64(r.exec.bytes)/1e6), "read-MB/op")
	b.ReportMetric(float64(r.heap)/1e6, "heap-MB")
	b.ReportMetric(per(float64(r.steps)), "steps/op")
	for _, v := range []string{"list", "get", "patch", "delete"} {
		b.ReportMetric(per(float64(r.fin.calls[v])), "fin-"+v+"/op")
	}
	if r.informer > 0 {
		b.ReportMetric(per(float64(r.informer)/1e6), "informer-MB/op")
	}
	b.ReportMetric(float64(r.gap.Milliseconds()), "gap-ms")
	b.ReportMetric(per(float64(r.absent)), "absent/op")
	b.ReportMetric(per(r.upgrade.Seconds()), "upgrade-s")
}

// summary is one line of the table BenchmarkScale logs at its end.
func (r scaleResult) summary(n int) string {
	return fmt.Sprintf("exec %7.0f ms, %d calls (%s), read %.1f MB, heap +%.1f MB, %d steps | finalizer %d calls (%s) | gap %d ms, %d absent | upgrade %.1f s",
		float64(r.took.Milliseconds())/float64(n), r.exec.total()/n, r.exec, float64(r.exec.bytes)/1e6/float64(n), float64(r.heap)/1e6, r.steps/n,
		r.fin.total()/n, r.fin, r.gap.Milliseconds(), r.absent/n, r.upgrade.Seconds()/float64(n))
}

// scaler runs one component's upgrade for BenchmarkScale.
type scaler struct {
	b       *testing.B
	e       *env
	n       int
	roles   []string
	planner handoff.Planner
	// exec counts the component reconciler's calls, fin the finalizer's
	// (the set controller's executor), ctl the rest of the set controller,
	// inf the cache flow's informer.
	exec, fin, ctl, inf apiCounter
	lister              handoff.SetLister
	measuring           bool
	took                time.Duration
	heap                uint64
	steps               int
}

// runScale upgrades a fresh component of n resources from v1 to v2 by
// flow and returns what the upgrade took.
func runScale(b *testing.B, flow string, n, iter int) scaleResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := fmt.Sprintf("scale-%s-%d", flow, n)
	if iter > 0 {
		name += fmt.Sprintf("-%d", iter)
	}
	s := &scaler{b: b, n: n}
	s.e = newEnv(b, name, "")
	s.setup(ctx, flow)

	s.drive(ctx, s.desire("v1"))
	before := s.uids(ctx)
	v2 := s.desire("v2")
	_, keys := s.e.shared("v1", "v2")

	var mon *monitor
	if flow == "legacy" {
		mctx, stop := context.WithCancel(ctx)
		defer stop()
		mon = startMonitor(b, mctx, s.e.dyn)
	}
	exec, fin, ctl, inf := s.exec.now(), s.fin.now(), s.ctl.now(), s.inf.now()
	s.measuring = true
	began := time.Now()
	if flow == "legacy" {
		s.e.ctrl.Legacy = true
		s.e.legacyRetire(ctx, s.deleteSet, s.timeout())
		s.drive(ctx, v2)
		s.e.ctrl.Legacy = false
	} else {
		s.drive(ctx, v2)
	}
	res := scaleResult{upgrade: time.Since(began), exec: s.exec.since(exec), fin: s.fin.since(fin),
		informer: s.inf.since(inf).bytes, took: s.took, heap: s.heap, steps: s.steps}
	s.measuring = false
	if flow == "legacy" {
		// The finalizer's deletes went through the set controller's client.
		res.fin.calls["delete"] += s.ctl.since(ctl).calls["delete"]
	}

	after := s.uids(ctx)
	s.checkEnd(ctx, keys, after)
	if mon != nil {
		time.Sleep(2 * time.Second) // let the monitor receive the last events
		deleted, longest := mon.stats(keys, began)
		res.gap, res.absent = longest, len(deleted)
		if len(deleted) == 0 {
			b.Errorf("legacy upgrade deleted no shared resource; the monitor should have seen deletions")
		}
	} else {
		for _, k := range keys {
			if before[k] != after[k] {
				res.absent++
			}
		}
		if res.absent > 0 {
			b.Errorf("%d of %d shared resources were deleted (a new UID) during the handoff", res.absent, len(keys))
		}
	}
	b.Logf("%s, %d resources (%d shared): %s", flow, n, len(keys), res.summary(1))
	return res
}

// setup gives the env unthrottled clients, counted where they are
// measured, and the cache flow its informer.
func (s *scaler) setup(ctx context.Context, flow string) {
	b, e := s.b, s.e
	var clients [4]dynamic.Interface
	for i, c := range []*apiCounter{nil, &s.exec, &s.fin, &s.ctl} {
		var err error
		if clients[i], err = c.client(); err != nil {
			b.Fatal(err)
		}
	}
	e.dyn = clients[0] // the benchmark's own reads: not counted
	_, s.roles = scaleComponent(e.ns, e.suffix, "v0", s.n)
	e.exec = e.executor(clients[1])
	e.exec.RoleOrder = s.roles
	e.ctrl.Executor.Dynamic = clients[2]
	e.ctrl.Client = clients[3]
	s.planner = handoff.Planner{Family: e.fam, RoleOrder: s.roles}
	switch flow {
	case "handoff", "legacy":
	case "cache":
		dyn, err := s.inf.client()
		if err != nil {
			b.Fatal(err)
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(dyn, e.fam.Resource, "", 0, cache.Indexers{},
			func(o *metav1.ListOptions) { o.LabelSelector = e.fam.LabelSelector().String() })
		go inf.Informer().Run(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			b.Fatal("informer of the sets did not sync")
		}
		s.lister = dynamiclister.New(inf.Informer().GetIndexer(), e.fam.Resource)
		e.exec.Cache = s.lister
	default:
		b.Fatalf("%s: unknown flow %q (want handoff, cache or legacy)", scaleFlowsEnv, flow)
	}
}

// desire registers generation gen of the env's component of s.n
// resources and returns it as the desired generation.
func (s *scaler) desire(gen string) *handoff.Desired {
	ms, roles := scaleComponent(s.e.ns, s.e.suffix, gen, s.n)
	return s.e.manifests.Desire(gen, roles, ms)
}

// timeout bounds one convergence: 3 minutes and 60 ms per resource.
func (s *scaler) timeout() time.Duration {
	return 3*time.Minute + time.Duration(s.n)*60*time.Millisecond
}

// measure runs one call of the component reconciler, timed (ns/op) and
// with its heap growth sampled, when the upgrade is being measured, and
// logs what it took as what.
func (s *scaler) measure(what func() string, f func()) {
	if !s.measuring {
		f()
		return
	}
	var took time.Duration
	heap := heapPeak(func() {
		began := time.Now()
		s.b.StartTimer()
		f()
		s.b.StopTimer()
		took = time.Since(began)
	})
	s.took += took
	s.heap = max(s.heap, heap)
	s.b.Logf("%s: %v, heap +%.1f MB", what(), took.Round(time.Millisecond), float64(heap)/1e6)
}

// deleteSet is legacy's component reconciler deleting an old set.
func (s *scaler) deleteSet(ctx context.Context, name string, opts metav1.DeleteOptions) (err error) {
	s.measure(func() string { return "delete set " + name },
		func() { err = s.e.exec.Dynamic.Resource(s.e.fam.Resource).Delete(ctx, name, opts) })
	return err
}

// drive converges the component to d. The executor steps when the plan
// of the family as listed differs from the plan right after its last
// Step (or that Step failed): as an operator reconciles when a set it
// watches changes. Each round runs the set controller once.
func (s *scaler) drive(ctx context.Context, d *handoff.Desired) {
	b, e := s.b, s.e
	deadline := time.Now().Add(s.timeout())
	last, failed := "", false
	for round := 1; ; round++ {
		if time.Now().After(deadline) {
			b.Fatalf("not converged to %s after %v (%d rounds)", d.Generation, s.timeout(), round)
		}
		sets, err := e.sets(ctx)
		if err != nil {
			b.Logf("round %d: list sets: %v (retrying)", round, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		plan, err := s.planner.Plan(sets, d)
		if err != nil {
			b.Fatal(err)
		}
		if plan.Settled() && !deleting(sets) {
			return
		}
		if failed || plan.String() != last {
			s.waitCache(ctx, sets)
			var res handoff.Result
			s.measure(func() string {
				return fmt.Sprintf("step (phase %s): %d writes, %d waits", res.Plan.Phase, len(res.Writes), len(res.Waiting))
			}, func() { res, err = e.exec.Step(ctx, d) })
			if s.measuring {
				s.steps++
			}
			if failed = err != nil; failed {
				b.Logf("round %d: step: %v (retrying)", round, err)
			}
			if after, lerr := e.sets(ctx); lerr == nil {
				if p, perr := s.planner.Plan(after, d); perr == nil {
					last = p.String()
				}
			}
		}
		if err := e.ctrl.Reconcile(ctx); err != nil {
			b.Logf("round %d: reconcile: %v (retrying)", round, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitCache waits (up to 5 s) until the cache flow's lister holds the
// sets as listed, as an informer-driven reconcile sees at least the event
// that triggered it.
func (s *scaler) waitCache(ctx context.Context, sets []handoff.Set) {
	if s.lister == nil {
		return
	}
	want := map[string]string{}
	for _, set := range sets {
		want[set.Name] = set.Object.GetResourceVersion()
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
		objs, err := s.lister.List(s.e.fam.LabelSelector())
		if err != nil {
			continue
		}
		got := map[string]string{}
		for _, o := range objs {
			got[o.GetName()] = o.GetResourceVersion()
		}
		if maps.Equal(got, want) {
			return
		}
	}
	s.b.Logf("the informer's cache still lags the API server after 5 s")
}

// uids returns the UID of every object of the env's component, by key.
func (s *scaler) uids(ctx context.Context) map[string]types.UID {
	out := map[string]types.UID{}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=e2e-" + s.e.suffix}
	for _, k := range kinds {
		if k.gvk.Kind == "Namespace" || k.gvk.Kind == setKind {
			continue
		}
		list, err := s.e.dyn.Resource(k.gvk.GroupVersion().WithResource(k.resource)).List(ctx, sel)
		if err != nil {
			s.b.Fatal(err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			u.SetKind(k.gvk.Kind)
			out[keyOf(u)] = u.GetUID()
		}
	}
	return out
}

// checkEnd checks I3 after the upgrade: every shared resource exists, the
// ConfigMap only v1 listed is gone, the one only v2 lists exists, and the
// family holds one live v2 set per role and nothing else.
func (s *scaler) checkEnd(ctx context.Context, shared []string, after map[string]types.UID) {
	b := s.b
	missing := 0
	for _, k := range shared {
		if after[k] == "" {
			missing++
		}
	}
	if missing > 0 {
		b.Errorf("%d shared resources missing after the upgrade", missing)
	}
	if k := keyOf(s.e.configMap(onlyIn("v1"))); after[k] != "" {
		b.Errorf("%s, only v1 listed it, remains", k)
	}
	if k := keyOf(s.e.configMap(onlyIn("v2"))); after[k] == "" {
		b.Errorf("%s, only v2 lists it, is missing", k)
	}
	sets, err := s.e.sets(ctx)
	if err != nil {
		b.Fatal(err)
	}
	roles := map[string]int{}
	for _, set := range sets {
		if set.Generation != "v2" || set.Deleting {
			b.Errorf("set %s of generation %s (deleting %v) remains", set.Name, set.Generation, set.Deleting)
		}
		roles[set.Role]++
	}
	for _, r := range s.roles {
		if roles[r] != 1 {
			b.Errorf("role %s has %d sets, want 1", r, roles[r])
		}
	}
}

// scaleComponent returns a component of n resources of generation gen by
// role, and its roles: of every 50 resources, 35 ConfigMaps, 2
// ServiceAccounts, 4 ClusterRoles and 4 ClusterRoleBindings, 2 (headless)
// Services, 2 Deployments with replicas 0 and 1
// ValidatingWebhookConfiguration; the last resource is the ConfigMap only
// this generation lists. As in tektoncd/operator, Deployments and
// Services go into the deployment roles, the rest into the static ones,
// at most setChunk per set. Every resource's content depends on gen.
func scaleComponent(ns, suffix, gen string, n int) (map[string][]*unstructured.Unstructured, []string) {
	lbls := map[string]string{"app.kubernetes.io/part-of": "e2e-" + suffix, versionLabel: gen}
	obj := func(apiVersion, kind, namespace, name string, body map[string]any) *unstructured.Unstructured {
		return handofftest.Object(apiVersion, kind, namespace, name, lbls, body)
	}
	payload := strings.Repeat("0123456789abcdef", 12) // ConfigMaps hold some configuration
	cluster := func(i int) string { return fmt.Sprintf("e2e-%s-%05d", suffix, i) }
	var static, deploy []*unstructured.Unstructured
	for i := range n - 1 {
		name := fmt.Sprintf("r-%05d", i)
		switch slot := i % 50; {
		case slot < 35:
			static = append(static, obj("v1", "ConfigMap", ns, name, map[string]any{"data": map[string]any{"version": gen, "payload": payload}}))
		case slot < 37:
			static = append(static, obj("v1", "ServiceAccount", ns, name, nil))
		case slot < 41:
			static = append(static, obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", cluster(i), map[string]any{"rules": []any{
				map[string]any{"apiGroups": []any{"e2e.example.com"}, "resources": []any{"things-" + gen}, "verbs": []any{"get", "list", "watch"}}}}))
		case slot < 45:
			// Binds the ClusterRole four before it to the group's first
			// ServiceAccount.
			static = append(static, obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", cluster(i), map[string]any{
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster(i - 4)},
				"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": fmt.Sprintf("r-%05d", i-slot+35), "namespace": ns}}}))
		case slot < 47:
			deploy = append(deploy, obj("v1", "Service", ns, name, map[string]any{"spec": map[string]any{
				"clusterIP": "None", // the /24 service range of the control plane holds 253 addresses
				"selector":  map[string]any{"app": name},
				"ports":     []any{map[string]any{"port": int64(9090), "name": "http-" + gen}}}}))
		case slot < 49:
			sel := map[string]any{"app": name}
			deploy = append(deploy, obj("apps/v1", "Deployment", ns, name, map[string]any{"spec": map[string]any{
				"replicas": int64(0),
				"selector": map[string]any{"matchLabels": sel},
				"template": map[string]any{"metadata": map[string]any{"labels": sel}, "spec": map[string]any{
					"containers": []any{map[string]any{"name": "main", "image": "example.com/e2e:" + gen}}}}}}))
		default:
			static = append(static, obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", cluster(i), webhookBody(gen)))
		}
	}
	static = append(static, obj("v1", "ConfigMap", ns, onlyIn(gen), map[string]any{"data": map[string]any{"version": gen}}))
	ms := map[string][]*unstructured.Unstructured{}
	var roles []string
	for _, part := range []struct {
		role string
		objs []*unstructured.Unstructured
	}{{"static", static}, {"deployment", deploy}} {
		for i := 0; i*setChunk < len(part.objs); i++ {
			role := fmt.Sprintf("%s-%d", part.role, i)
			ms[role] = part.objs[i*setChunk : min((i+1)*setChunk, len(part.objs))]
			roles = append(roles, role)
		}
	}
	return ms, roles
}
