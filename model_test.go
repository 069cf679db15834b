package handoff_test

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The model-based test (issue 13): a seeded random walk over what happens
// to a component's sets on a cluster — desired generation changes, legacy
// and unreadable sets, executor Steps racing each other, set-controller
// passes with a lagging view, a garbage collector that runs at once or
// lags, crashes at any API call, and CRDs that a stale REST mapper does not
// know — checked after every write of every API call against the
// invariants, and at the end for convergence. A failing walk is shrunk to
// the shortest sequence of operations that still fails and printed with
// its seed.
//
// Issue 22 added (model_seams_test.go): executors reaching listed
// resources per call, through one long-lived NewDynamicObjects, or through
// ManifestivalObjects wired as tektoncd/operator does; kinds served at
// some API versions and not others, and generations listing one object at
// different versions; kinds that become served and unserved (cert-manager
// installed and uninstalled, Triggers' CRDs deleted, the Prometheus
// operator's ServiceMonitor served only in the final convergence); a second
// family of sets sharing objects with the first (I4 across families); an
// operator that stops reconciling a component once a removal Step reports
// it settled (I3-removal); and Finalize's report checked against the
// cluster (no object reported handed over still names the set).
//
// Issue 34 added: updates in place (opHash) that grow the static set,
// shrink it (an owned ConfigMap and an unowned webhook configuration go)
// and move every set of the generation to the other namespace, checked
// for what they drop: pruned only once the set that dropped it is Ready
// for the spec that dropped it (I5), gone in the end unless the executor
// reported it left out of its record (I3); and, in one walk in a hundred,
// sets hundreds of ConfigMaps larger, so the record of what a move drops
// comes near the 128 KiB the executor writes.
//
// Issue 36 added: ClusterRoles installed without an owner, so that the
// executor deletes them itself, and the order of a Step's deletes: none
// after an RBAC object's (order).
//
// CI runs thousands of walks without -race:
//
//	go test -run TestModel -model.seeds 3000 .
//
// One walk again: -model.first SEED -model.seeds 1.
var (
	modelSeeds  = flag.Int("model.seeds", 100, "number of random walks TestModel runs")
	modelFirst  = flag.Int64("model.first", 1, "seed of TestModel's first walk")
	modelOps    = flag.Int("model.ops", 32, "operations per walk")
	modelReport = flag.Int("model.report", 1, "failing walks shrunk and printed per invariant")
	modelShrink = flag.Int("model.shrink", 400, "most replays spent shrinking one failing walk")
	modelWithin = flag.Duration("model.shrinktime", time.Minute, "most time spent shrinking one failing walk")
	modelTrace  = flag.Bool("model.trace", false, "print the API calls and writes of each shrunk failing walk")
	modelList   = flag.Bool("model.list", false, "log the first violation of each invariant of every failing walk")
)

type modelOutcome struct {
	seed int64
	cfg  modelConfig
	ops  []op
	res  runResult
}

func TestModel(t *testing.T) {
	start := time.Now()
	// The walks allocate much and keep little: collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	seeds := make(chan int64)
	outcomes := make(chan modelOutcome)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				cfg, ops := genWalk(seed, *modelOps)
				outcomes <- modelOutcome{seed: seed, cfg: cfg, ops: ops, res: runModel(cfg, ops)}
			}
		}()
	}
	go func() {
		for i := range *modelSeeds {
			seeds <- *modelFirst + int64(i)
		}
		close(seeds)
		wg.Wait()
		close(outcomes)
	}()

	var (
		all                                              []modelOutcome
		nops, calls, writes, upgrades, maxWrites, nviols int
		big, maxDropped, unrecorded                      int
	)
	for o := range outcomes {
		all = append(all, o)
		nops += len(o.ops)
		calls += o.res.calls
		writes += o.res.writes
		upgrades += o.res.upgrades
		maxWrites = max(maxWrites, o.res.maxWrites)
		nviols += len(o.res.violations)
		big += b2i(o.cfg.Big)
		maxDropped = max(maxDropped, o.res.maxDropped)
		unrecorded += o.res.unrecorded
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seed < all[j].seed })
	t.Logf("model: %d seeds (%d to %d), %d operations, %d API calls checked (%d writes), "+
		"%d upgrades write-counted (at most %d writes to a shared resource), %d walks with big sets (largest record of what an update dropped: %d bytes; %d resources reported left out of one), %d violations, %s",
		len(all), *modelFirst, *modelFirst+int64(*modelSeeds)-1, nops, calls, writes,
		upgrades, maxWrites, big, maxDropped, unrecorded, nviols, time.Since(start).Round(time.Second))

	// Failing seeds by invariant, the first few of each shrunk.
	byInv := map[string][]modelOutcome{}
	for _, o := range all {
		seen := map[string]bool{}
		for _, v := range o.res.violations {
			if !seen[v.Inv] {
				seen[v.Inv] = true
				byInv[v.Inv] = append(byInv[v.Inv], o)
				if *modelList {
					t.Logf("seed %d [%s]: %s", o.seed, o.cfg, v)
				}
			}
		}
	}
	invs := make([]string, 0, len(byInv))
	for inv := range byInv {
		invs = append(invs, inv)
	}
	sort.Strings(invs)
	for _, inv := range invs {
		fails := byInv[inv]
		var seedList []string
		for _, o := range fails {
			seedList = append(seedList, fmt.Sprint(o.seed))
		}
		t.Errorf("%s broken in %d of %d walks (seeds %s)", inv, len(fails), len(all), abbreviate(seedList, 20))
		for _, o := range fails[:min(len(fails), *modelReport)] {
			t.Error(reportFailure(o, inv))
		}
	}
}

func abbreviate(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, " ")
	}
	return strings.Join(s[:n], " ") + fmt.Sprintf(" … (%d more)", len(s)-n)
}

// reportFailure shrinks a failing walk for one invariant and renders it.
func reportFailure(o modelOutcome, inv string) string {
	fails := func(ops []op) (violation, bool) {
		for _, v := range runModel(o.cfg, ops).violations {
			if v.Inv == inv {
				return v, true
			}
		}
		return violation{}, false
	}
	deadline := time.Now().Add(*modelWithin)
	shrunk := shrinkOps(o.ops, func(ops []op) bool {
		if time.Now().After(deadline) {
			return false
		}
		_, ok := fails(ops)
		return ok
	}, *modelShrink)
	v, ok := fails(shrunk)
	if !ok { // not reproducible: report the walk as it ran
		shrunk = o.ops
		for _, x := range o.res.violations {
			if x.Inv == inv {
				v = x
				break
			}
		}
	}
	out := fmt.Sprintf("seed %d: %s\n  world: %s\n  shortest failing walk (%d of %d operations; op %d is the final convergence):\n%s",
		o.seed, v, o.cfg, len(shrunk), len(o.ops), len(shrunk)+1, describeAll(shrunk))
	if *modelTrace {
		out += runModel(o.cfg, shrunk).trace
	}
	return out
}

// shrinkOps is delta debugging over the operation list, then a pass that
// simplifies single operations; fails replays a candidate. It spends at
// most budget replays.
func shrinkOps(ops []op, fails func([]op) bool, budget int) []op {
	tries := 0
	try := func(c []op) bool {
		if tries >= budget {
			return false
		}
		tries++
		return fails(c)
	}
	for n := 2; len(ops) >= 2 && tries < budget; {
		chunk := (len(ops) + n - 1) / n
		reduced := false
		for i := 0; i < len(ops); i += chunk {
			cand := slices.Concat(ops[:i], ops[min(i+chunk, len(ops)):])
			if try(cand) {
				ops, n, reduced = cand, max(n-1, 2), true
				break
			}
		}
		if !reduced {
			if n >= len(ops) {
				break
			}
			n = min(2*n, len(ops))
		}
	}
	for changed := true; changed && tries < budget; {
		changed = false
		for i := range ops {
			for _, s := range simpler(ops[i]) {
				cand := slices.Clone(ops)
				cand[i] = s
				if try(cand) {
					ops, changed = cand, true
					break
				}
			}
		}
	}
	return ops
}

// simpler returns variants of an operation with one choice made plainer.
func simpler(o op) []op {
	var out []op
	add := func(f func(*op)) {
		c := o
		f(&c)
		out = append(out, c)
	}
	if o.Fault != nil {
		add(func(c *op) { c.Fault = nil })
	}
	if o.N > 1 {
		add(func(c *op) { c.N = 1 })
	}
	if o.Ctrl {
		add(func(c *op) { c.Ctrl = false })
	}
	if o.GC > 0 {
		add(func(c *op) { c.GC = 0 })
	}
	if o.Lag > 0 {
		add(func(c *op) { c.Lag = 0 })
	}
	if o.Stale {
		add(func(c *op) { c.Stale = false })
	}
	return out
}
