//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamiclister"
	"k8s.io/client-go/tools/cache"
)

// Environment variables that narrow BenchmarkScale, e.g. for CI.
const (
	// scaleSizesEnv lists the component sizes, comma-separated; unset
	// means 100,1000,5000 (20000 runs on demand).
	scaleSizesEnv = "HANDOFF_SCALE_SIZES"
	// scaleFlowsEnv lists the flows run unthrottled, comma-separated, of
	// handoff (the executor reading sets from the API server), parallel
	// (the same, its set writes scaleConcurrency at a time), metadata
	// (parallel with Executor.Metadata), cache (reading sets from a
	// dynamic informer's lister), tuned (cache and metadata together) and legacy (tektoncd/operator's delete-then-create);
	// unset means handoff,parallel,cache,tuned,legacy.
	scaleFlowsEnv = "HANDOFF_SCALE_FLOWS"
	// scaleThrottledFlowsEnv lists the flows run under each client-side
	// rate limit; unset means handoff,legacy.
	scaleThrottledFlowsEnv = "HANDOFF_SCALE_THROTTLED_FLOWS"
	// scaleQPSEnv lists the client-side rate limits, comma-separated, each
	// QPS or QPS/BURST (burst twice QPS unless given), 0 for none; unset
	// means 0,5: every size unthrottled and under client-go's default
	// limit (QPS 5, burst 10).
	scaleQPSEnv = "HANDOFF_SCALE_QPS"
)

// scaleConcurrency is the parallel flow's Executor.Concurrency.
const scaleConcurrency = 4

// setChunk is the most resources one set lists: a set of 500 is about
// 250 KB, like tektoncd/operator's pipelines sets, and etcd stores at most
// 1.5 MiB per object, so a component of 5 000 resources takes 11 sets.
const setChunk = 500

// scaleMode is the client-side rate limit of the component reconciler's
// and the finalizer's clients: none (qps 0), or client-go's token bucket.
type scaleMode struct {
	qps   float32
	burst int
}

func (m scaleMode) String() string {
	if m.qps <= 0 {
		return "unthrottled"
	}
	return fmt.Sprintf("qps=%g,burst=%d", m.qps, m.burst)
}

// label is the mode as the table shows it.
func (m scaleMode) label() string {
	if m.qps <= 0 {
		return "none"
	}
	return fmt.Sprintf("%g QPS, burst %d", m.qps, m.burst)
}

// suffix tells components of different modes apart in names.
func (m scaleMode) suffix() string {
	if m.qps <= 0 {
		return ""
	}
	return strings.ReplaceAll(fmt.Sprintf("-q%gb%d", m.qps, m.burst), ".", "p")
}

// BenchmarkScale upgrades a component of 100, 1 000 and 5 000 resources
// (HANDOFF_SCALE_SIZES; 20 000 on demand) from generation v1 to v2 on the
// real control plane, once per flow and client-side rate limit, and
// reports what the component reconciler did during the upgrade:
//
//   - ns/op: wall time of its own calls, excluding readiness waits: the sum
//     of the executor's Step calls (for legacy, also its Deletes of the
//     old sets), each timed alone, waits for the rate limiter included
//     (wait-s/op); the rounds in which the set controller works and
//     Deployments become Available are not timed;
//   - list/op … delete/op, read-MB/op: its API calls by verb and the
//     response bytes it read, counted by a RoundTripper around its
//     client's transport (the cache flow's informer is counted apart, in
//     informer-MB/op);
//   - heap-MB: the most its calls grew the heap, from runtime/metrics
//     sampled every millisecond during each call after a GC (see
//     heapPeak); B/op and allocs/op are what the timed calls allocated;
//   - fin-*/op, fin-s/op: the calls of the set controller's finalizer
//     (Finalize, or legacy's delete of every listed resource by name), and
//     the wall time during which one was under way;
//   - retire-reads/op: the reads of the retirement (the executor's Steps
//     in phase Handoff, and the finalizer), beside pairs, the (group-kind,
//     namespace) pairs the retiring generation lists (the table also has
//     them summed over its sets, and the Lists by scope and page);
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
// the test binary allocates during a timed call.
//
// Throttled (HANDOFF_SCALE_QPS), the executor's rest.Config (which legacy's
// reconciler deletes sets with), the finalizer's and the informer's carry
// client-go's rate limiter; the rest of the set controller, which applies
// manifests and stands in for tektoncd/operator's (the same work in every
// flow), stays unthrottled. Legacy's finalizer deletes through the set
// controller's client, so its DELETEs wait for the finalizer's limiter in
// the transport, as client-go's would before sending them.
//
// At the end it prints the results as a markdown table, as in docs/scale.md.
// Run it with hack/e2e.sh, without the race detector and one iteration,
// and a timeout for the sizes: every default case takes about an hour on
// 2 cores, most of it legacy's throttled finalizer at 5 000 (its deletes
// by name, 5 a second):
//
//	E2E_PKGS=./e2e/ bash hack/e2e.sh -race=false -run '^$' -bench Scale -benchtime 1x -timeout 240m -v
func BenchmarkScale(b *testing.B) {
	sizes := scaleList(b, scaleSizesEnv, "100,1000,5000")
	modes := scaleModes(b)
	var (
		mu   sync.Mutex
		rows []scaleRow
	)
	for _, n := range sizes {
		size, err := strconv.Atoi(n)
		if err != nil || size < 2 {
			b.Fatalf("%s: size %q is not a number of at least 2", scaleSizesEnv, n)
		}
		for _, mode := range modes {
			flows := scaleList(b, scaleFlowsEnv, "handoff,parallel,cache,tuned,legacy")
			if mode.qps > 0 {
				flows = scaleList(b, scaleThrottledFlowsEnv, "handoff,legacy")
			}
			for _, flow := range flows {
				b.Run(fmt.Sprintf("n=%d/%s/%s", size, mode, flow), func(b *testing.B) {
					b.StopTimer()
					b.ReportAllocs()
					var sum scaleResult
					for i := range b.N {
						sum = sum.add(runScale(b, flow, size, mode, i))
					}
					sum.report(b)
					mu.Lock()
					rows = append(rows, scaleRow{size, mode, flow, b.N, sum})
					mu.Unlock()
				})
			}
		}
	}
	if len(rows) > 0 {
		fmt.Printf("\nBenchmarkScale: the table (markdown)\n\n%s\n", scaleTable(rows))
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

// scaleModes returns the rate limits scaleQPSEnv lists.
func scaleModes(b *testing.B) []scaleMode {
	var out []scaleMode
	for _, f := range scaleList(b, scaleQPSEnv, "0,5") {
		qs, bs, explicit := strings.Cut(f, "/")
		qps, err := strconv.ParseFloat(qs, 32)
		if err != nil || qps < 0 {
			b.Fatalf("%s: %q is not QPS or QPS/BURST", scaleQPSEnv, f)
		}
		m := scaleMode{qps: float32(qps), burst: int(2 * qps)}
		if explicit {
			if m.burst, err = strconv.Atoi(bs); err != nil || m.burst < 1 {
				b.Fatalf("%s: %q is not QPS or QPS/BURST", scaleQPSEnv, f)
			}
		}
		if m.qps > 0 && m.burst < 1 {
			m.burst = 1
		}
		if m.qps == 0 {
			m.burst = 0
		}
		out = append(out, m)
	}
	return out
}

// scaleResult is what one flow's upgrade took.
type scaleResult struct {
	exec, fin apiCount
	// retire is the executor's calls in the Steps that retired (phase
	// Handoff), or legacy's deletes of the old sets.
	retire   apiCount
	informer int64 // bytes the cache flow's informer read
	took     time.Duration
	heap     uint64
	steps    int
	gap      time.Duration
	absent   int
	shared   int
	upgrade  time.Duration
	// pairs are the (group-kind, namespace) pairs v1 lists, over the
	// generation and summed over its sets, of which there are sets.
	pairs, setPairs, sets int
}

func (r scaleResult) add(o scaleResult) scaleResult {
	return scaleResult{exec: r.exec.add(o.exec), fin: r.fin.add(o.fin), retire: r.retire.add(o.retire),
		informer: r.informer + o.informer, took: r.took + o.took, heap: max(r.heap, o.heap), steps: r.steps + o.steps,
		gap: max(r.gap, o.gap), absent: r.absent + o.absent, shared: r.shared + o.shared, upgrade: r.upgrade + o.upgrade,
		pairs: max(r.pairs, o.pairs), setPairs: max(r.setPairs, o.setPairs), sets: max(r.sets, o.sets)}
}

var scaleVerbs = []string{"list", "get", "create", "update", "patch", "delete"}

// reads counts a's reads: gets and lists.
func (a apiCount) reads() int { return a.calls["get"] + a.calls["list"] }

// writes counts a's writes.
func (a apiCount) writes() int {
	return a.calls["create"] + a.calls["update"] + a.calls["patch"] + a.calls["delete"] + a.calls["deletecollection"]
}

func (r scaleResult) report(b *testing.B) {
	per := func(v float64) float64 { return v / float64(b.N) }
	for _, v := range scaleVerbs {
		b.ReportMetric(per(float64(r.exec.calls[v])), v+"/op")
	}
	b.ReportMetric(per(float64(r.exec.bytes)/1e6), "read-MB/op")
	b.ReportMetric(per(r.exec.waited.Seconds()), "wait-s/op")
	b.ReportMetric(float64(r.heap)/1e6, "heap-MB")
	b.ReportMetric(per(float64(r.steps)), "steps/op")
	for _, v := range []string{"list", "get", "patch", "delete"} {
		b.ReportMetric(per(float64(r.fin.calls[v])), "fin-"+v+"/op")
	}
	b.ReportMetric(per(r.fin.busy.Seconds()), "fin-s/op")
	b.ReportMetric(per(float64(r.retire.reads()+r.fin.reads())), "retire-reads/op")
	b.ReportMetric(float64(r.pairs), "pairs")
	if r.informer > 0 {
		b.ReportMetric(per(float64(r.informer)/1e6), "informer-MB/op")
	}
	b.ReportMetric(float64(r.gap.Milliseconds()), "gap-ms")
	b.ReportMetric(per(float64(r.absent)), "absent/op")
	b.ReportMetric(per(r.upgrade.Seconds()), "upgrade-s")
}

// summary is one upgrade's figures, for the log.
func (r scaleResult) summary() string {
	return fmt.Sprintf("exec %v (waited %v), %d calls (%s; in calls: %s), read %.1f MB, heap +%.1f MB, %d steps | retire: step %s; pairs %d (%d over %d sets) | finalizer %v, %d calls (%s) | gap %d ms, %d absent | upgrade %.1f s",
		r.took.Round(time.Millisecond), r.exec.waited.Round(time.Millisecond), r.exec.total(), r.exec, r.exec.spentString(scaleVerbs), float64(r.exec.bytes)/1e6, float64(r.heap)/1e6, r.steps,
		r.retire, r.pairs, r.setPairs, r.sets, r.fin.busy.Round(time.Millisecond), r.fin.total(), r.fin, r.gap.Milliseconds(), r.absent, r.upgrade.Seconds())
}

// scaleRow is one line of the table: the sum of n upgrades.
type scaleRow struct {
	size int
	mode scaleMode
	flow string
	n    int
	sum  scaleResult
}

// scaleTable renders the rows as docs/scale.md's markdown table, per
// upgrade.
func scaleTable(rows []scaleRow) string {
	var t strings.Builder
	t.WriteString("| resources | flow | client limit | reconciler time | reconciler calls | read | heap | (kind, namespace) pairs | retirement reads | retirement writes | finalizer calls | finalizer time | shared absent | longest absence | whole upgrade |\n")
	t.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range rows {
		r, n := row.sum, row.n
		per := func(d time.Duration) time.Duration { return d / time.Duration(n) }
		took := seconds(per(r.took))
		if row.mode.qps > 0 {
			took += fmt.Sprintf(" (%s waiting)", seconds(per(r.exec.waited)))
		}
		read := megabytes(r.exec.bytes / int64(n))
		if r.informer > 0 {
			read += " + " + megabytes(r.informer/int64(n)) + " informer"
		}
		gap := "0"
		if r.gap > 0 {
			gap = seconds(r.gap)
		}
		retireReads := grouped(r.retire.reads()/n + r.fin.reads()/n)
		if row.flow != "legacy" {
			retireReads += " = Step " + readCell(r.retire, n) + " + Finalize " + readCell(r.fin, n)
		}
		retireWrites := r.retire.only("create", "update", "patch", "delete").add(r.fin.only("create", "update", "patch", "delete"))
		cells := []string{
			grouped(row.size), row.flow, row.mode.label(), took,
			callCell(r.exec, n), read, fmt.Sprintf("+%.1f MB", float64(r.heap)/1e6),
			fmt.Sprintf("%d (%s over %d sets)", r.pairs, grouped(r.setPairs), r.sets),
			retireReads, callCell(retireWrites, n),
			callCell(r.fin, n), seconds(per(r.fin.busy)),
			fmt.Sprintf("%s of %s", grouped(r.absent/n), grouped(r.shared/n)), gap, seconds(per(r.upgrade)),
		}
		t.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return t.String()
}

// only returns a's calls of the verbs.
func (a apiCount) only(verbs ...string) apiCount {
	out := apiCount{calls: map[string]int{}}
	for _, v := range verbs {
		if a.calls[v] != 0 {
			out.calls[v] = a.calls[v]
		}
	}
	return out
}

// callCell renders a's calls per upgrade of n as "1 012: get 1 000, list
// 3, …", reads first.
func callCell(a apiCount, n int) string {
	order := []string{"get", "list", "create", "update", "patch", "delete"}
	var extra []string
	for v := range a.calls {
		if !slices.Contains(order, v) {
			extra = append(extra, v)
		}
	}
	slices.Sort(extra)
	order = append(order, extra...)
	var parts []string
	for _, v := range order {
		if c := a.calls[v] / n; c != 0 {
			parts = append(parts, v+" "+grouped(c))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return grouped(a.total()/n) + ": " + strings.Join(parts, ", ")
}

// readCell renders a's reads per upgrade of n as "1 001 (get 1 000,
// sets 1)" or "19 (sets 4, scopes 12, pages 3)": Gets; Lists of the
// family's sets; first pages of Lists of a kind in a namespace (or
// cluster-wide), once per scope read; their further pages.
func readCell(a apiCount, n int) string {
	var sets, scopes, pages int
	for l, c := range a.lists {
		switch {
		case l.resource == handofftest.SetResource.Resource:
			sets += c
		case l.page:
			pages += c
		default:
			scopes += c
		}
	}
	var parts []string
	for _, p := range []struct {
		what string
		n    int
	}{{"get", a.calls["get"]}, {"sets", sets}, {"scopes", scopes}, {"pages", pages}} {
		if p.n/n != 0 {
			parts = append(parts, p.what+" "+grouped(p.n/n))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return grouped(a.reads()/n) + " (" + strings.Join(parts, ", ") + ")"
}

// grouped writes n with its thousands apart: 12 345 as "12 345".
func grouped(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + grouped(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

func seconds(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func megabytes(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// scaler runs one component's upgrade for BenchmarkScale.
type scaler struct {
	b       *testing.B
	e       *env
	n       int
	mode    scaleMode
	roles   []string
	planner handoff.Planner
	// exec counts the component reconciler's calls, fin the finalizer's
	// (the set controller's executor, or legacy's deletes by name), ctl
	// the rest of the set controller, inf the cache flow's informer.
	exec, fin, ctl, inf apiCounter
	lister              handoff.SetLister
	measuring           bool
	took                time.Duration
	heap                uint64
	steps               int
	retire              apiCount
}

// runScale upgrades a fresh component of n resources from v1 to v2 by
// flow under the client-side rate limit of mode and returns what the
// upgrade took.
func runScale(b *testing.B, flow string, n int, mode scaleMode, iter int) scaleResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := fmt.Sprintf("scale-%s-%d%s", flow, n, mode.suffix())
	if iter > 0 {
		name += fmt.Sprintf("-%d", iter)
	}
	s := &scaler{b: b, n: n, mode: mode}
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
	exec, fin, inf := s.exec.now(), s.fin.now(), s.inf.now()
	s.measuring = true
	began := time.Now()
	if flow == "legacy" {
		s.e.ctrl.Legacy = true
		s.e.legacyRetire(ctx, s.deleteSet, s.timeout())
		s.retire = s.exec.since(exec)
		s.drive(ctx, v2)
		s.e.ctrl.Legacy = false
	} else {
		s.drive(ctx, v2)
	}
	res := scaleResult{upgrade: time.Since(began), exec: s.exec.since(exec), fin: s.fin.since(fin), retire: s.retire,
		informer: s.inf.since(inf).bytes, took: s.took, heap: s.heap, steps: s.steps, shared: len(keys)}
	res.pairs, res.setPairs, res.sets = s.pairs("v1")
	s.measuring = false

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
	b.Logf("%s, %d resources (%d shared), %s: %s", flow, n, len(keys), mode, res.summary())
	s.cleanup(ctx)
	return res
}

// cleanup deletes the component's cluster-scoped objects, so that a later
// component's Lists of a cluster-scoped kind read the ClusterRoles (say)
// of its own and the control plane's, not of every component before it.
// Namespaced objects stay in the component's namespace, which no other
// component lists.
func (s *scaler) cleanup(ctx context.Context) {
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=e2e-" + s.e.suffix}
	for _, k := range kinds {
		if k.namespaced || k.gvk.Kind == "Namespace" || k.gvk.Kind == setKind {
			continue
		}
		gvr := k.gvk.GroupVersion().WithResource(k.resource)
		if err := s.e.dyn.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			s.b.Errorf("clean up %s: %v", k.resource, err)
		}
	}
}

// pairs returns how many (group-kind, namespace) pairs generation gen's
// sets list together, and summed over its sets, of which it has sets.
func (s *scaler) pairs(gen string) (pairs, setPairs, sets int) {
	all := map[string]bool{}
	for _, ms := range s.e.manifests[gen] {
		own := map[string]bool{}
		for _, m := range ms {
			k := m.GroupVersionKind().GroupKind().String() + "/" + m.GetNamespace()
			all[k], own[k] = true, true
		}
		setPairs += len(own)
		sets++
	}
	return len(all), setPairs, sets
}

// setup gives the env clients counted where they are measured, throttled
// by s.mode where a real operator's would be, and the cache flow its
// informer.
func (s *scaler) setup(ctx context.Context, flow string) {
	b, e := s.b, s.e
	for _, c := range []*apiCounter{&s.exec, &s.fin, &s.inf} {
		c.throttle(s.mode.qps, s.mode.burst)
	}
	var clients [3]dynamic.Interface
	for i, c := range []*apiCounter{nil, &s.exec, &s.fin} {
		var err error
		if clients[i], err = c.client(); err != nil {
			b.Fatal(err)
		}
	}
	// The set controller deletes only as legacy's finalizer: those calls
	// are the finalizer's, counted and throttled as such.
	ctl, err := s.ctl.splitClient(&s.fin, func(r *http.Request) bool { return r.Method == http.MethodDelete })
	if err != nil {
		b.Fatal(err)
	}
	e.dyn = clients[0] // the benchmark's own reads: not counted
	_, s.roles = scaleComponent(e.ns, e.suffix, "v0", s.n)
	e.exec = e.executor(clients[1])
	e.exec.RoleOrder = s.roles
	e.ctrl.Executor.Dynamic = clients[2]
	e.ctrl.Client = ctl
	s.planner = handoff.Planner{Family: e.fam, RoleOrder: s.roles}
	switch flow {
	case "handoff", "legacy":
	case "parallel":
		e.exec.Concurrency = scaleConcurrency
	case "metadata":
		// parallel, with metadata alone where that is enough (no cache).
		e.exec.Concurrency = scaleConcurrency
		if e.exec.Metadata, err = s.exec.metadataClient(); err != nil {
			b.Fatal(err)
		}
		if e.ctrl.Executor.Metadata, err = s.fin.metadataClient(); err != nil {
			b.Fatal(err)
		}
	case "cache", "tuned":
		dyn, err := s.inf.client()
		if err != nil {
			b.Fatal(err)
		}
		// The informer client-go's dynamicinformer.NewFilteredDynamicInformer
		// makes (that package would compile every API group's typed
		// informers into these tests).
		sets, selector := dyn.Resource(e.fam.Resource), e.fam.LabelSelector().String()
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{
			ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = selector
				return sets.List(ctx, o)
			},
			WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = selector
				return sets.Watch(ctx, o)
			},
		}, &unstructured.Unstructured{}, 0, cache.Indexers{})
		go inf.Run(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			b.Fatal("informer of the sets did not sync")
		}
		s.lister = dynamiclister.New(inf.GetIndexer(), e.fam.Resource)
		e.exec.Cache = s.lister
		if flow == "tuned" {
			// As a large operator would run it: its informer's cache and
			// metadata alone where that is enough, its set controller's
			// finalizer with metadata too. Set writes one at a time: on
			// this control plane of 2 cores, four 250 KB set writes at a
			// time take longer, each, than four in a row.
			if e.exec.Metadata, err = s.exec.metadataClient(); err != nil {
				b.Fatal(err)
			}
			if e.ctrl.Executor.Metadata, err = s.fin.metadataClient(); err != nil {
				b.Fatal(err)
			}
		}
	default:
		b.Fatalf("unknown flow %q (want handoff, parallel, metadata, cache, tuned or legacy)", flow)
	}
}

// desire registers generation gen of the env's component of s.n
// resources and returns it as the desired generation.
func (s *scaler) desire(gen string) *handoff.Desired {
	ms, roles := scaleComponent(s.e.ns, s.e.suffix, gen, s.n)
	return s.e.manifests.Desire(gen, roles, ms)
}

// timeout bounds one convergence: 3 minutes and 60 ms per resource, and
// throttled, the time for three calls per resource at the limit.
func (s *scaler) timeout() time.Duration {
	d := 3*time.Minute + time.Duration(s.n)*60*time.Millisecond
	if s.mode.qps > 0 {
		d += time.Duration(float64(3*s.n) / float64(s.mode.qps) * float64(time.Second))
	}
	return d
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
// Step (or that Step failed or was interrupted): as an operator
// reconciles when a set it watches changes, or requeues. Each round runs
// the set controller once.
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
			at := s.exec.now()
			s.measure(func() string {
				return fmt.Sprintf("step (phase %s): %d writes, %d waits", res.Plan.Phase, len(res.Writes), len(res.Waiting))
			}, func() { res, err = e.exec.Step(ctx, d) })
			if s.measuring {
				s.steps++
				if plan.Phase == handoff.PhaseHandoff || res.Plan.Phase == handoff.PhaseHandoff {
					s.retire = s.retire.add(s.exec.since(at))
				}
			}
			if failed = err != nil; failed {
				b.Logf("round %d: step: %v (retrying)", round, err)
			}
			// A Step its StepTimeout stopped goes on at the next round,
			// whether or not its plan changed.
			failed = failed || res.Interrupted
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
// ConfigMap only v1 listed is gone (within a minute: the garbage
// collector deletes it), the one only v2 lists exists, and the
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
	if cm := s.e.configMap(onlyIn("v1")); after[keyOf(cm)] != "" {
		// Finalize leaves what the retiring set alone owns to the garbage
		// collector, which deletes it once the set is gone.
		deadline := time.Now().Add(time.Minute)
		_, err := s.e.get(ctx, cm)
		for ; err == nil && time.Now().Before(deadline); _, err = s.e.get(ctx, cm) {
			time.Sleep(100 * time.Millisecond)
		}
		if !apierrors.IsNotFound(err) {
			b.Errorf("%s, only v1 listed it, remains a minute after the upgrade (%v)", keyOf(cm), err)
		}
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
