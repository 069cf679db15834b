package handoff_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// opKind is what one operation of a walk does.
type opKind int

const (
	// opDesire makes a generation of the catalog desired: an install,
	// upgrade, skip or rollback, by where it stands from the last one.
	opDesire opKind = iota
	// opRemove desires no generation.
	opRemove
	// opHash changes the desired generation's content: an update in place.
	opHash
	// opRoles adds or drops the statefulset role.
	opRoles
	// opLegacy creates a set of a (generation, role) with GenerateName, as
	// the operator did before it used the library.
	opLegacy
	// opUnreadable creates a set of the family the library cannot read:
	// no role can be derived from its name, or a manifest has no name.
	opUnreadable
	// opRepair makes the unreadable sets readable.
	opRepair
	// opStep runs executor Steps, racing with each other and, optionally,
	// the set controller and garbage-collector passes.
	opStep
	// opCtrl runs one set-controller pass, its view of the family
	// possibly lagging.
	opCtrl
	// opGC runs the garbage collector (when it lags).
	opGC
	// opAdmin is something a cluster admin does (Variant: adminCertManager,
	// adminTriggersCRDs, adminUpgrade).
	opAdmin
	// opSecond removes the second family's component, or installs it
	// again (modelConfig.Second).
	opSecond
)

// faultSpec is the crash an operation suffers: the nth API call of an
// actor fails, before or after it takes effect, or each call fails with a
// probability.
type faultSpec struct {
	Actor string
	Nth   int
	After bool
	Rate  float64
	Seed  int64
}

func (f faultSpec) String() string {
	if f.Rate > 0 {
		return fmt.Sprintf("random faults, rate %.2f, seed %d", f.Rate, f.Seed)
	}
	mode := "before-commit"
	if f.After {
		mode = "after-commit"
	}
	return fmt.Sprintf("%s call #%d fails %s", f.Actor, f.Nth, mode)
}

// op is one operation of a walk. It carries every choice it needs, so a
// walk replays the same from its list of operations alone.
type op struct {
	Kind opKind
	// Gen, STS: opDesire; Gen, Role, Stale (an older hash): opLegacy;
	// Gen, Variant: opUnreadable.
	Gen     int
	STS     bool
	Role    string
	Stale   bool
	Variant int
	// N executors race in an opStep, with the controller if Ctrl, and GC
	// garbage-collector passes, interleaved by Sched.
	N     int
	Ctrl  bool
	GC    int
	Sched int64
	// Record: the executors of an opStep call Record, which must delete
	// nothing, rather than Step. Derived from Sched (every fifth schedule),
	// so the walks' random stream, and every seed's walk, stay as they were.
	Record bool
	// Lag is how many passes behind the controller's view is (opCtrl).
	Lag   int
	Fault *faultSpec
}

func (o op) structural() bool { return o.Kind <= opRepair || o.Kind >= opAdmin }

// describe renders an operation, given the desired generation before it.
func (o op) describe(prev *modelDesired) string {
	var s string
	switch o.Kind {
	case opDesire:
		kind := "install"
		if prev != nil {
			switch {
			case o.Gen == prev.Gen:
				kind = "same generation"
			case o.Gen == prev.Gen+1:
				kind = "upgrade"
			case o.Gen > prev.Gen:
				kind = "upgrade skipping a generation"
			default:
				kind = "rollback"
			}
		}
		roles := "static,deployment"
		if o.STS {
			roles += ",statefulset"
		}
		s = fmt.Sprintf("desire %s [%s] (%s)", genName(o.Gen), roles, kind)
	case opRemove:
		s = "remove the component (desired nil)"
	case opHash:
		s = "change the desired generation's content in place (next hash: grown, shrunk, moved to the other namespace or as it was)"
	case opRoles:
		s = "switch roles: add or drop statefulset"
	case opLegacy:
		s = fmt.Sprintf("create legacy GenerateName set %s/%s", genName(o.Gen), o.Role)
		if o.Stale {
			s += " with an older hash"
		}
	case opUnreadable:
		why := "no role in its name"
		if o.Variant == 1 {
			why = "a manifest without a name"
		}
		s = fmt.Sprintf("create unreadable set of %s (%s)", genName(o.Gen), why)
	case opRepair:
		s = "repair the unreadable sets"
	case opStep:
		s = fmt.Sprintf("step: %d executor(s)", o.N)
		if o.Record {
			s = fmt.Sprintf("record: %d executor(s)", o.N)
		}
		if o.Ctrl {
			s += " + controller"
		}
		if o.GC > 0 {
			s += fmt.Sprintf(" + %d GC pass(es)", o.GC)
		}
		if o.N+b2i(o.Ctrl)+b2i(o.GC > 0) > 1 {
			s += fmt.Sprintf(" racing (schedule %d)", o.Sched)
		}
	case opCtrl:
		s = "controller pass"
		if o.Lag > 0 {
			s += fmt.Sprintf(", its view %d pass(es) behind", o.Lag)
		}
	case opGC:
		s = "garbage collector pass"
	case opAdmin:
		s = adminString(o.Variant)
	case opSecond:
		s = "remove the TektonTrigger component's set, or install it again"
	}
	if o.Fault != nil {
		s += "; " + o.Fault.String()
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// describeAll renders a walk, one numbered line per operation.
func describeAll(ops []op) string {
	var b strings.Builder
	var d *modelDesired
	for i, o := range ops {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, o.describe(d))
		switch o.Kind {
		case opDesire:
			d = &modelDesired{Gen: o.Gen, STS: o.STS}
		case opRemove:
			d = nil
		}
	}
	return b.String()
}

// genWalk draws a seed's configuration and walk: phases of one structural
// change (desired generation, legacy or unreadable sets) followed by a
// burst of Steps, controller passes and garbage collection, long enough
// for an upgrade to complete more often than not.
func genWalk(seed int64, n int) (modelConfig, []op) {
	r := rand.New(rand.NewSource(seed))
	cfg := randomConfig(r)
	cfg.Concurrency = 1 + 2*int(seed&1)
	cfg.Metadata = seed&2 != 0
	cfg.Big = seed%100 == 50
	cur, sts := r.Intn(2), r.Intn(3) == 0
	ops := []op{{Kind: opDesire, Gen: cur, STS: sts}}
	removed, unreadable := false, 0
	fault := func(actors []string) *faultSpec {
		switch x := r.Intn(10); {
		case x < 2:
			return &faultSpec{Actor: actors[r.Intn(len(actors))], Nth: 1 + r.Intn(15), After: r.Intn(2) == 0}
		case x < 3:
			return &faultSpec{Rate: 0.05 + 0.15*r.Float64(), Seed: r.Int63()}
		}
		return nil
	}
	busy := func() op {
		switch x := r.Intn(100); {
		case x < 50:
			o := op{Kind: opStep, N: 1 + r.Intn(cfg.Executors), Ctrl: r.Intn(4) == 0, Sched: r.Int63()}
			o.Record = o.Sched%5 == 0
			if cfg.GCLag && r.Intn(3) == 0 {
				o.GC = 1 + r.Intn(2)
			}
			var actors []string
			for i := range o.N {
				actors = append(actors, fmt.Sprintf("executor-%d", i+1))
			}
			if o.Ctrl {
				actors = append(actors, "controller")
			}
			o.Fault = fault(actors)
			return o
		case x < 88 || !cfg.GCLag:
			o := op{Kind: opCtrl}
			if r.Intn(4) == 0 {
				o.Lag = 1 + r.Intn(3)
			}
			o.Fault = fault([]string{"controller"})
			return o
		}
		return op{Kind: opGC}
	}
	change := func() op {
		if cfg.Big && r.Intn(10) < 6 {
			// Big walks change their content in place more often than
			// not: it is what their size is for.
			return op{Kind: opHash}
		}
		switch x := r.Intn(120); {
		case x < 45:
			g := r.Intn(mGens - 1)
			if g >= cur {
				g++
			}
			if removed {
				g = r.Intn(mGens)
			}
			if r.Intn(4) == 0 {
				sts = !sts
			}
			cur, removed = g, false
			return op{Kind: opDesire, Gen: g, STS: sts}
		case x < 55:
			return op{Kind: opHash}
		case x < 65:
			sts = !sts
			return op{Kind: opRoles}
		case x < 71:
			removed = true
			return op{Kind: opRemove}
		case x < 88:
			g := cur
			if r.Intn(3) == 0 {
				g = r.Intn(mGens)
			}
			return op{Kind: opLegacy, Gen: g, Role: mRoles[r.Intn(len(mRoles))], Stale: r.Intn(3) == 0}
		case x < 95 && unreadable < 2:
			unreadable++
			return op{Kind: opUnreadable, Gen: r.Intn(mGens), Variant: r.Intn(2)}
		case x < 100:
			return op{Kind: opRepair}
		case x < 114 || !cfg.Second:
			v := r.Intn(adminVariants)
			if v == adminUpgrade && cfg.OldAPIs != oldDropped {
				v = r.Intn(adminUpgrade)
			}
			return op{Kind: opAdmin, Variant: v}
		}
		return op{Kind: opSecond}
	}
	for len(ops) < n {
		for range 2 + r.Intn(10) {
			ops = append(ops, busy())
		}
		ops = append(ops, change())
	}
	return cfg, ops[:n]
}

// apply carries out one operation.
func (w *modelWorld) apply(ctx context.Context, o op) {
	if o.Fault != nil {
		if o.Fault.Rate > 0 {
			f := handofftest.RandomFaults(o.Fault.Seed, o.Fault.Rate)
			w.c.InjectFaults(func(c handofftest.Call) handofftest.Fault {
				if strings.HasSuffix(c.Actor, readSuffix) {
					return handofftest.Fault{} // reads outside the race (mfObjects)
				}
				return f(c)
			})
		} else {
			mode := handofftest.BeforeCommit
			if o.Fault.After {
				mode = handofftest.AfterCommit
			}
			w.c.InjectFaults(handofftest.FailNth(o.Fault.Nth, mode, nil), o.Fault.Actor)
		}
		defer w.c.DisableFaults()
	}
	switch o.Kind {
	case opDesire:
		w.desired = &modelDesired{Gen: o.Gen, H: w.hashes[o.Gen], STS: o.STS}
		w.dropped = false
	case opRemove:
		w.desired = nil
	case opHash:
		if w.desired != nil {
			w.hashes[w.desired.Gen]++
			w.desired.H = w.hashes[w.desired.Gen]
		}
	case opRoles:
		if w.desired != nil {
			w.desired.STS = !w.desired.STS
		}
	case opLegacy:
		if !w.dropped { // nobody makes sets of a component gone for good
			w.createLegacy(ctx, w.legacySet(o.Gen, o.Role, o.Stale))
		}
	case opUnreadable:
		if !w.dropped {
			w.createLegacy(ctx, w.unreadableSet(o.Gen, o.Variant))
		}
	case opRepair:
		w.repair(ctx)
	case opStep:
		w.step(ctx, o)
	case opCtrl:
		w.lag = o.Lag
		_ = w.ctrl.Reconcile(ctx) // errors are the faults and conflicts of the walk
		w.lag = 0
		w.reconcileSecond(ctx)
	case opGC:
		w.c.CollectGarbage()
	case opAdmin:
		w.admin(ctx, o.Variant)
	case opSecond:
		w.toggleSecond(ctx)
	}
}

func (w *modelWorld) step(ctx context.Context, o op) {
	var (
		actors [][]string
		parts  []func()
	)
	// A Record needs a desired generation: with none (the component
	// removed), the executors Step.
	recording := o.Record && w.desired.desired() != nil
	for i := range o.N {
		if w.dropped {
			break // the operator no longer reconciles the component
		}
		e, d, actor := w.executorFor(i), w.desired.desired(), fmt.Sprintf("executor-%d", i+1)
		actors = append(actors, []string{actor})
		parts = append(parts, func() {
			if recording {
				res, err := e.Record(ctx, d)
				w.stepped(actor, d, res, err)
				return
			}
			res, err := e.Step(ctx, d)
			w.stepped(actor, d, res, err)
		})
	}
	if o.Ctrl {
		actors = append(actors, []string{"controller", actorSecondCtrl})
		parts = append(parts, func() {
			_ = w.ctrl.Reconcile(ctx)
			w.reconcileSecond(ctx)
		})
	}
	if o.GC > 0 {
		actors = append(actors, []string{"gc"})
		parts = append(parts, func() {
			for range o.GC {
				w.turn("gc")
				w.c.CollectGarbage()
			}
		})
	}
	from := len(w.c.Writes())
	defer func() {
		if !recording {
			return
		}
		for _, wr := range w.c.WritesSince(from) {
			if strings.HasPrefix(wr.Actor, "executor-") && (wr.Verb == "delete" || wr.Verb == "deletecollection") {
				w.vs = append(w.vs, violation{Inv: "record", Op: w.op, At: wr.Time,
					Msg: fmt.Sprintf("%s deleted %s in a Record", wr.Actor, wr.Key)})
			}
		}
	}()
	switch len(parts) {
	case 0:
		return
	case 1:
		parts[0]()
		return
	}
	w.race(o.Sched, actors, parts)
}

// legacySet is a set of a (generation, role) as tektoncd/operator created
// it before the library: GenerateName, no role label, the role only in the
// name; stale gives it an older content hash.
func (w *modelWorld) legacySet(g int, role string, stale bool) *unstructured.Unstructured {
	h := w.hashes[g]
	u := w.cfg.setBody(g, role, h)
	u.SetGenerateName(mPrefix + role + "-")
	u.SetLabels(map[string]string{mCreatedBy: "TektonPipeline", mType: "main", mGeneration: genName(g)})
	ann := u.GetAnnotations()
	ann[mHash] = roleHash(g, role, h)
	if stale {
		ann[mHash] = "legacy-" + genName(g)
	}
	u.SetAnnotations(ann)
	return u
}

// unreadableSet is a legacy static set of generation g that cannot be
// read whole: no role in its name (variant 0), or a manifest without a
// name (variant 1).
func (w *modelWorld) unreadableSet(g, variant int) *unstructured.Unstructured {
	u := w.legacySet(g, "static", false)
	if variant == 0 {
		u.SetGenerateName(mPrefix)
		return u
	}
	ms, _, _ := unstructured.NestedSlice(u.Object, "spec", "manifests")
	ms = append(ms, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": w.cfg.Gens[g].NS}})
	_ = unstructured.SetNestedSlice(u.Object, ms, "spec", "manifests")
	return u
}

func (w *modelWorld) createLegacy(ctx context.Context, u *unstructured.Unstructured) {
	_, _ = w.legacy.Resource(mSetGVR).Create(ctx, u, metav1.CreateOptions{})
}

// repair gives every unreadable set of the family what it lacks: the
// role label, or manifests without the nameless entry.
func (w *modelWorld) repair(ctx context.Context) {
	sets := w.legacy.Resource(mSetGVR)
	list, err := sets.List(ctx, metav1.ListOptions{LabelSelector: w.fam.LabelSelector().String()})
	if err != nil {
		return
	}
	for _, it := range list.Items {
		s := deriveSet(&it)
		if !s.inFamily || s.readable() {
			continue
		}
		if s.role == "" {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{handoff.DefaultRoleLabel: "static"}}})
			_, _ = sets.Patch(ctx, it.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if s.badEntry {
			ms, _, _ := unstructured.NestedSlice(it.Object, "spec", "manifests")
			var good []any
			for _, m := range ms {
				if e := (&unstructured.Unstructured{Object: m.(map[string]any)}); e.GetName() != "" {
					good = append(good, m)
				}
			}
			next := it.DeepCopy()
			_ = unstructured.SetNestedSlice(next.Object, good, "spec", "manifests")
			_, _ = sets.Update(ctx, next, metav1.UpdateOptions{})
		}
	}
}

// settle runs rounds without faults, each an executor Step and a
// controller pass with a current view (and garbage collection when it
// lags), until the family has converged by the model's reading or the
// budget is spent.
func (w *modelWorld) settle(ctx context.Context, budget int) int {
	w.c.DisableFaults()
	w.serveOptional(ctx)
	for round := 1; round <= budget; round++ {
		if !w.dropped {
			d := w.desired.desired()
			res, err := w.executorFor(0).Step(ctx, d)
			w.stepped("executor-1", d, res, err)
		}
		if w.cfg.GCLag {
			w.c.CollectGarbage()
		}
		_ = w.ctrl.Reconcile(ctx)
		w.reconcileSecond(ctx)
		if w.cfg.GCLag {
			w.c.CollectGarbage()
		}
		if w.converged() {
			return round
		}
	}
	return budget
}

// converged reads the cluster as the checker does.
func (w *modelWorld) converged() bool {
	list, err := w.model.Resource(mSetGVR).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false
	}
	ch := newChecker(nil, nil)
	for i := range list.Items {
		if s := deriveSet(&list.Items[i]); s.inFamily {
			ch.sets[s.key] = s
		}
	}
	ok, _ := ch.converged(w.desired)
	return ok
}

// runResult is what one walk found.
type runResult struct {
	violations []violation
	calls      int
	writes     int
	rounds     int
	trace      string // with -model.trace: the calls and writes, in order
	upgrades   int    // upgrades whose writes were counted
	maxWrites  int
	maxDropped int // bytes of the largest record of what an update dropped
	unrecorded int // resources reported left out of such a record
}

// settleBudget is the rounds the final convergence may take (I3).
const settleBudget = 16

// runModel plays a walk on a fresh world and checks it.
func runModel(cfg modelConfig, ops []op) runResult {
	ctx := context.Background()
	w, err := newModelWorld(cfg)
	if err != nil {
		return runResult{violations: []violation{{Inv: "setup", Msg: err.Error()}}}
	}
	spans := []span{{to: w.c.Now()}}
	snapshot := func() *modelDesired {
		if w.desired == nil {
			return nil
		}
		d := *w.desired
		return &d
	}
	for i, o := range ops {
		w.op = i + 1
		from := w.c.Tick()
		w.apply(ctx, o)
		spans = append(spans, span{from: from, to: w.c.Now(), desired: snapshot(), structural: o.structural()})
	}
	from := w.c.Tick()
	w.cacheMu.Lock()
	w.cacheFresh = true
	w.cacheMu.Unlock()
	w.op = len(ops) + 1
	rounds := w.settle(ctx, settleBudget)
	spans = append(spans, span{from: from, to: w.c.Now(), desired: snapshot()})
	ch := newChecker(spans, w.decoys)
	ch.unserved = w.unserved()
	ch.unrecorded = w.unrecorded
	ch.replay(w.c.Writes())
	ch.vs = append(ch.vs, w.vs...)
	for _, p := range w.panics {
		ch.vs = append(ch.vs, violation{Inv: "panic", Op: len(spans) - 1, Msg: p})
	}
	res := runResult{violations: ch.vs, calls: len(w.c.Actions()), writes: ch.writes, rounds: rounds, upgrades: ch.upgrades, maxWrites: ch.maxWrites, maxDropped: ch.maxDropped, unrecorded: len(w.unrecorded)}
	if *modelTrace {
		res.trace = traceOf(w.c, spans)
	}
	return res
}

// traceOf renders every API call and write in clock order, by operation.
func traceOf(c *handofftest.Cluster, spans []span) string {
	type line struct {
		at  time.Time
		txt string
	}
	var lines []line
	for _, a := range c.Actions() {
		txt := fmt.Sprintf("call  %-12s %s %s", a.Actor, a.GetVerb(), a.GetResource().Resource)
		if n, ok := a.Action.(interface{ GetName() string }); ok && n.GetName() != "" {
			txt += " " + n.GetName()
		}
		if a.Err != nil {
			txt += fmt.Sprintf(" -> error (injected %v): %.80s", a.Injected, a.Err.Error())
		}
		lines = append(lines, line{a.Time, txt})
	}
	for _, w := range c.Writes() {
		txt := fmt.Sprintf("write %-12s %s %s: %s", w.Actor, w.Verb, w.Key, w.Effect)
		if refs := w.Object.GetOwnerReferences(); len(refs) > 0 {
			txt += " owners:"
			for _, r := range refs {
				txt += " " + r.Name
			}
		}
		lines = append(lines, line{w.Time, txt})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	var b strings.Builder
	op := 0
	for _, l := range lines {
		for op < len(spans)-1 && l.at.After(spans[op].to) {
			op++
			fmt.Fprintf(&b, "  -- op %d\n", op)
		}
		fmt.Fprintf(&b, "  %s %s\n", l.at.Format(time.TimeOnly), l.txt)
	}
	return b.String()
}
