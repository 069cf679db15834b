package inventory_test

// Random walks of an in-place operator over inventory sets, checked
// against the design's invariants after every operation: I1 (nothing a
// live inventory or the desired generation lists is deleted), I4 (nothing
// foreign, keep-annotated or co-owned is deleted, and the executor writes
// no object it was not given), I5 (no old inventory goes while the desired
// generation's Deployments are not rolled out for it, by an oracle written
// here, not by the library's probe), and at the end of each walk I2 and I3
// (one inventory per role of the desired generation, nothing only older
// generations listed) and a removal that leaves what it must. The walk
// plays knative/operator's stages (record the inventory with a Step, stamp,
// apply in place under the same names, wait, Step) with faults injected
// into the executor's and the operator's calls, a deployment controller
// that rolls out when it gets to it, and desires that change at any point.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var walks = flag.Int("inventory.walks", 40, "random walks TestInventoryWalks runs")

const (
	walkOps  = 40
	invNS    = "knative-operator"
	podUID   = types.UID("uid-some-pod")
	keepName = "kept-certs"
)

// walkGenerations are four releases applied in place: the same
// Deployments and webhook each time (each release rolls the Deployments
// out again), and objects that come and go between them. The keys are
// contents: a generation's name, or for a content a generation takes
// after an update in place, the generation's name, "~" and the change
// (see genOf and sized).
func walkGenerations() map[string][]unstructured.Unstructured {
	dep := func(name, gen string) unstructured.Unstructured {
		return *handofftest.Object("apps/v1", "Deployment", servingNS, name, nil, map[string]any{"spec": map[string]any{
			"replicas": int64(1),
			"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"release": gen}}},
		}})
	}
	cm := func(name string) unstructured.Unstructured {
		return *handofftest.Object("v1", "ConfigMap", servingNS, name, nil, map[string]any{"data": map[string]any{"k": name}})
	}
	kept := *handofftest.Object("v1", "Secret", servingNS, keepName, nil, nil)
	kept.SetAnnotations(map[string]string{handoff.DefaultKeepAnnotation: handoff.KeepValue})
	base := func(gen string) []unstructured.Unstructured {
		return []unstructured.Unstructured{
			dep("controller", gen), dep("webhook", gen), cm("config-shared"),
			*handofftest.Object("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.webhook.serving", nil, nil),
		}
	}
	oldRole := *handofftest.Object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "serving-old-role", nil, nil)
	return map[string][]unstructured.Unstructured{
		"g1": append(base("g1"), cm("only-g1"), kept, cm("co-owned"), oldRole),
		"g2": append(base("g2"), cm("only-g2"), cm("co-owned"), dep("extra", "g2")),
		"g3": append(base("g3"), cm("only-g3"), oldRole, dep("extra", "g3")),
		"g4": append(base("g4"), cm("only-g1")),
	}
}

// foreignObjects are in the component's namespace throughout and listed by
// no generation: one owned by someone else, one by nobody.
func foreignObjects() []*unstructured.Unstructured {
	owned := handofftest.Object("v1", "ConfigMap", servingNS, "someone-elses", nil, nil)
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: podUID}})
	return []*unstructured.Unstructured{owned, handofftest.Object("v1", "ConfigMap", servingNS, "nobodys", nil, nil)}
}

// genOf returns the generation of a content: its key up to "~".
func genOf(content string) string {
	gen, _, _ := strings.Cut(content, "~")
	return gen
}

// walkSize is how large a walk's generations are.
type walkSize int

const (
	// sizePlain: a dozen objects, one part each; changes in place move,
	// add and remove a few.
	sizePlain walkSize = iota
	// sizeParts: the smallest budget a part may have (4 KiB) and
	// hundreds of filler ConfigMaps, so that a generation takes 5 to 13
	// parts, and changes in place that grow it past ten parts, shrink it
	// back and move its fillers to another namespace, each moving the
	// Deployments from part to part ("part-10" sorts before "part-4").
	sizeParts
	// sizeLimits: the default budget (512 KiB) and 1 000 fillers with
	// names of 200 characters in one part: moving them to another
	// namespace drops more than an annotation may hold (the API server
	// takes 256 KiB for all of an object's annotations; the JSON of their
	// references takes 267 KB).
	sizeLimits
)

func (s walkSize) String() string {
	return [...]string{"plain", "parts at the 10-part boundary", "a part past the annotation limit"}[s]
}

// sizeOf picks the size of a walk from its seed: beyond the default
// forty walks (which go test -race runs, and which stay plain and quick:
// TestInPlaceShrinkPastTenParts and TestUpdateInPlaceMovesALargePart play
// the same limits once), one walk in forty has many parts (seeds 70, 110,
// …) and one in a hundred and sixty a part past the annotation limit
// (seeds 100, 260, …).
func sizeOf(seed int64) walkSize {
	switch {
	case seed <= 40:
		return sizePlain
	case seed%160 == 100:
		return sizeLimits
	case seed%40 == 30:
		return sizeParts
	}
	return sizePlain
}

// inPlace adds to gens, for a walk of size size, the contents each
// generation takes by an update in place: "~grown" (more fillers),
// "~shrunk" (fewer, and without its only-<gen> ConfigMap) and "~moved"
// (its only-<gen> and config-shared ConfigMaps and its fillers in another
// namespace). Filler ConfigMaps come before and after the base objects in
// key order, so that the Deployments move from part to part as they come
// and go; the generation's own content gets its usual fillers.
func inPlace(gens map[string][]unstructured.Unstructured, size walkSize) {
	moved := servingNS + "-moved"
	fill := func(ns string, n int) []unstructured.Unstructured {
		out := make([]unstructured.Unstructured, 0, n)
		for i := 0; i < n; i++ {
			prefix, name := "a-fill", ""
			if i%10 == 9 {
				prefix = "z-fill" // after the Deployments
			}
			if size == sizeLimits {
				name = fmt.Sprintf("%s-%04d-%s", prefix, i, strings.Repeat("x", 188))
			} else {
				name = fmt.Sprintf("%s-%04d", prefix, i)
			}
			out = append(out, *handofftest.Object("v1", "ConfigMap", ns, name, nil, map[string]any{"data": map[string]any{"k": "v"}}))
		}
		return out
	}
	// With the 4 KiB budget a part holds some 90 entries: 450 fillers
	// are 5 or 6 parts, 1 100 are 12 or 13.
	small, usual, large := 0, 0, 4
	switch size {
	case sizeParts:
		small, usual, large = 450, 700, 1100
	case sizeLimits:
		small, usual, large = 600, 1000, 1400
	}
	for _, gen := range []string{"g1", "g2", "g3", "g4"} {
		base := gens[gen]
		var shrunk, relocated []unstructured.Unstructured
		for _, o := range base {
			name := o.GetName()
			if name != "only-"+gen {
				shrunk = append(shrunk, o)
			}
			if o.GetKind() == "ConfigMap" && (name == "only-"+gen || name == "config-shared") {
				o = *o.DeepCopy()
				o.SetNamespace(moved)
			}
			relocated = append(relocated, o)
		}
		gens[gen] = append(slices.Clone(base), fill(servingNS, usual)...)
		gens[gen+"~grown"] = append(slices.Clone(base), fill(servingNS, large)...)
		gens[gen+"~shrunk"] = append(shrunk, fill(servingNS, small)...)
		gens[gen+"~moved"] = append(relocated, fill(moved, usual)...)
	}
}

type walk struct {
	t       *testing.T
	rand    *rand.Rand
	c       *handofftest.Cluster
	inv     inventory.Inventory
	size    walkSize
	gens    map[string][]unstructured.Unstructured // by content
	byKey   map[handofftest.Key][]string           // the contents that list each object
	writes  int                                    // the cluster's writes checked
	desired string                                 // a content; empty: the removal
	log     []string
	seed    int64
}

func newWalk(t *testing.T, seed int64) *walk { return newWalkOf(t, seed, sizeOf(seed)) }

func newWalkOf(t *testing.T, seed int64, size walkSize) *walk {
	opts := []handofftest.Option{handofftest.WithSeed(seed)}
	if size != sizePlain {
		// The component object (a kind the cluster does not serve, so
		// live to the garbage collector) owns everything: the collector
		// has nothing to do, and a pass after each of thousands of writes
		// would cost minutes.
		opts = append(opts, handofftest.WithoutAutoGC())
	}
	c := handofftest.NewCluster(opts...)
	w := &walk{t: t, rand: rand.New(rand.NewSource(seed)), c: c, seed: seed, size: size, gens: walkGenerations(),
		inv: inventory.Inventory{Namespace: invNS, Component: "knative-serving"}}
	if size == sizeParts {
		w.inv.MaxBytes = inventory.MinMaxBytes
	}
	inPlace(w.gens, size)
	if err := c.Add(foreignObjects()...); err != nil {
		t.Fatal(err)
	}
	w.writes = len(c.Writes())
	return w
}

// gen is the desired generation; empty for the removal.
func (w *walk) gen() string { return genOf(w.desired) }

func (w *walk) executor() *handoff.Executor {
	return w.inv.Executor(w.c.ClientFor("executor"), w.c.Mapper(), crUID)
}

// family lists the inventories as the operator sees them.
func (w *walk) family(ctx context.Context) ([]handoff.Set, error) {
	fam := w.inv.Family()
	list, err := w.c.ClientFor("operator").Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).
		Namespace(invNS).List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
	if err != nil {
		return nil, err
	}
	return fam.ObserveAll(list.Items)
}

// reconcile is one pass of the operator's stages for the desired
// generation (nil desired: the removal).
func (w *walk) reconcile(ctx context.Context) (handoff.Result, error) {
	exec := w.executor()
	if w.desired == "" {
		return exec.Step(ctx, nil)
	}
	objs := w.gens[w.desired]
	g, err := w.inv.Generation(w.gen(), objs)
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := exec.Step(ctx, g.Desired)
	if err != nil {
		return res, err
	}
	family, err := w.family(ctx)
	if err != nil {
		return res, err
	}
	stamped := make([]unstructured.Unstructured, len(objs))
	for i := range objs {
		stamped[i] = *objs[i].DeepCopy()
	}
	if err := inventory.Stamp(family, w.gen(), stamped); err != nil {
		return res, err
	}
	for i := range stamped {
		if err := w.apply(ctx, &stamped[i]); err != nil {
			return res, err
		}
	}
	return res, nil
}

// apply writes obj as the operator does: created, or updated in place
// (same UID) with the manifest's content, namespaced objects given the
// component object's controller reference beside whatever owners they
// have.
func (w *walk) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	m, err := w.c.Mapper().RESTMapping(obj.GroupVersionKind().GroupKind())
	if err != nil {
		return err
	}
	ri := w.c.ClientFor("operator").Resource(m.Resource).Namespace(obj.GetNamespace())
	live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if obj.GetNamespace() != "" {
			owned := ownedByCR(*obj)
			obj.SetOwnerReferences(owned.GetOwnerReferences())
		}
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	next := live.DeepCopy()
	for k, v := range obj.Object {
		if k != "metadata" && k != "status" {
			next.Object[k] = v
		}
	}
	ann := next.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	for k, v := range obj.GetAnnotations() {
		ann[k] = v
	}
	next.SetAnnotations(ann)
	if obj.GetNamespace() != "" && !slices.ContainsFunc(live.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == crUID }) {
		owned := ownedByCR(*obj)
		next.SetOwnerReferences(append(live.GetOwnerReferences(), owned.GetOwnerReferences()...))
	}
	if equality.Semantic.DeepEqual(live.Object, next.Object) {
		return nil // nothing to change, as manifestival's apply finds
	}
	_, err = ri.Update(ctx, next, metav1.UpdateOptions{})
	return err
}

// rollOut plays the deployment controller (the test kit's) on each
// Deployment with probability p: status for its current generation,
// rolled out.
func (w *walk) rollOut(ctx context.Context, p float64) {
	r := handofftest.Rollouts{Hold: func(*unstructured.Unstructured) bool { return w.rand.Float64() >= p }}
	if _, err := r.RollOut(ctx, w.c); err != nil {
		w.t.Fatal(err)
	}
}

// inventories returns the inventory ConfigMaps stored.
func (w *walk) inventories() []*unstructured.Unstructured {
	sel := labels.SelectorFromSet(w.inv.Family().Selector)
	var out []*unstructured.Unstructured
	for _, k := range w.c.Keys() {
		if k.Kind != "ConfigMap" || k.Namespace != invNS {
			continue
		}
		if o, ok := w.c.Get(k); ok && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out
}

// rolledOut is the oracle of I5: every Deployment the desired content
// lists was applied for the part of the desired generation that lists it
// (its writer stamp names that part's UID) and rolled out at its current
// generation. The parts are the inventories of the generation that are
// live and not superseded; those an update in place dropped, and the
// records of what it dropped, are superseded by their own generation.
func (w *walk) rolledOut() bool {
	if w.desired == "" {
		return true
	}
	lister := map[handoff.Ref]types.UID{}
	for _, cm := range w.inventories() {
		if cm.GetLabels()[inventory.GenerationLabel] != w.gen() || cm.GetDeletionTimestamp() != nil ||
			cm.GetAnnotations()[handoff.DefaultSupersededAnnotation] != "" {
			continue
		}
		refs, err := inventory.Resources(cm)
		if err != nil {
			w.t.Fatal(err)
		}
		for _, r := range refs {
			lister[r] = cm.GetUID()
		}
	}
	for i := range w.gens[w.desired] {
		o := &w.gens[w.desired][i]
		uid, ok := lister[handoff.RefOf(o)]
		if !ok {
			return false // not recorded yet
		}
		if o.GetKind() != "Deployment" {
			continue
		}
		live, ok := w.c.Get(handofftest.KeyOf(o))
		if !ok || !strings.HasPrefix(live.GetAnnotations()[handoff.WriterAnnotation], string(uid)+"@") {
			return false
		}
		observed, _, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration")
		updated, _, _ := unstructured.NestedInt64(live.Object, "status", "updatedReplicas")
		conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
		if observed < live.GetGeneration() || updated != 1 || len(conds) == 0 {
			return false
		}
	}
	return true
}

// liveKeys returns the keys of the objects stored.
func (w *walk) liveKeys() map[handofftest.Key]bool {
	out := map[handofftest.Key]bool{}
	for _, k := range w.c.Keys() {
		if w.c.Exists(k) {
			out[k] = true
		}
	}
	return out
}

// listedBy returns the contents that list key.
func (w *walk) listedBy(key handofftest.Key) []string {
	if w.byKey == nil {
		w.byKey = map[handofftest.Key][]string{}
		for c, objs := range w.gens {
			for i := range objs {
				k := handofftest.KeyOf(&objs[i])
				w.byKey[k] = append(w.byKey[k], c)
			}
		}
	}
	return w.byKey[key]
}

// liveListers returns, for each object a live inventory lists, the
// inventories listing it.
func (w *walk) liveListers() map[handofftest.Key][]string {
	out := map[handofftest.Key][]string{}
	for _, cm := range w.inventories() {
		if cm.GetDeletionTimestamp() != nil {
			continue
		}
		refs, err := inventory.Resources(cm)
		if err != nil {
			w.t.Fatal(err)
		}
		for _, r := range refs {
			k := handofftest.Key{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
			out[k] = append(out[k], cm.GetName())
		}
	}
	return out
}

func isForeign(k handofftest.Key) bool {
	return k.Kind == "ConfigMap" && (k.Name == "someone-elses" || k.Name == "nobodys")
}

// check runs after every operation: I1, I4 and I5 over what the operation
// changed.
func (w *walk) check(op string, before map[handofftest.Key]bool, listers map[handofftest.Key][]string, oldLive []string, ready bool, writesBefore int) error {
	var errs []error
	after := w.liveKeys()
	for k := range before {
		if after[k] || k.Namespace == invNS {
			continue
		}
		// An inventory set owns nothing and goes after its objects: what
		// only old inventories list is deleted in the Step that then
		// deletes them, so it may go while they are still live, but only
		// once the desired generation is rolled out.
		// I1 is about what serves: an object the desired generation lists
		// and a live inventory (not one being retired) lists too. One that
		// only a retiring inventory lists may go with it even when the
		// generation it belonged to is desired again meanwhile; it comes
		// back when that generation is recorded anew.
		desired := w.desired != "" && slices.Contains(w.listedBy(k), w.desired)
		switch {
		case desired && len(listers[k]) > 0:
			errs = append(errs, fmt.Errorf("I1: %s, listed by %v, deleted by %q while the desired content %s lists it", k, listers[k], op, w.desired))
		case isForeign(k) || k.Name == keepName || k.Name == "co-owned":
			errs = append(errs, fmt.Errorf("I4: %s deleted by %q", k, op))
		case len(listers[k]) > 0 && !ready:
			errs = append(errs, fmt.Errorf("I5: %s, listed by %v, deleted by %q before content %s rolled out", k, listers[k], op, w.desired))
		}
	}
	written := w.c.WritesSince(writesBefore)
	w.writes = writesBefore + len(written)
	for _, wr := range written {
		if wr.Actor != "executor" || wr.Key.Namespace == invNS {
			continue
		}
		switch {
		case isForeign(wr.Key) || wr.Key.Name == "co-owned":
			errs = append(errs, fmt.Errorf("I4: the executor wrote %s (%s)", wr.Key, wr.Verb))
		case wr.Verb != "delete" && wr.Key.Name != keepName:
			errs = append(errs, fmt.Errorf("I4: the executor wrote %s (%s): only a kept object's release is a write that is not a delete", wr.Key, wr.Verb))
		}
	}
	if !ready {
		still := map[string]bool{}
		for _, cm := range w.inventories() {
			if cm.GetDeletionTimestamp() == nil {
				still[cm.GetName()] = true
			}
		}
		for _, name := range oldLive {
			if !still[name] {
				errs = append(errs, fmt.Errorf("I5: old inventory %s retired by %q while content %s was not rolled out", name, op, w.desired))
			}
		}
	}
	return errors.Join(errs...)
}

// step runs one operation and checks it.
func (w *walk) step(ctx context.Context, op string, fn func()) error {
	before := w.liveKeys()
	listers := w.liveListers()
	var oldLive []string
	for _, cm := range w.inventories() {
		if cm.GetDeletionTimestamp() == nil && cm.GetLabels()[inventory.GenerationLabel] != w.gen() {
			oldLive = append(oldLive, cm.GetName())
		}
	}
	ready := w.rolledOut()
	writes := w.writes
	w.log = append(w.log, fmt.Sprintf("%d. %s", len(w.log)+1, op))
	fn()
	return w.check(op, before, listers, oldLive, ready, writes)
}

func (w *walk) run() error {
	ctx := context.Background()
	gens := []string{"g1", "g2", "g3", "g4"}
	contents := make([]string, 0, len(w.gens))
	for c := range w.gens {
		contents = append(contents, c)
	}
	slices.Sort(contents)
	w.desired = gens[w.rand.Intn(len(gens))]
	for i := 0; i < walkOps; i++ {
		var op string
		var fn func()
		switch n := w.rand.Intn(10); {
		case n < 1:
			next := contents[w.rand.Intn(len(contents))]
			op, fn = "desire "+next, func() { w.desired = next }
		case n < 2:
			// An update in place: another content of the same generation.
			var same []string
			for _, c := range contents {
				if genOf(c) == w.gen() && c != w.desired {
					same = append(same, c)
				}
			}
			next := gens[w.rand.Intn(len(gens))]
			if len(same) > 0 {
				next = same[w.rand.Intn(len(same))]
			}
			op, fn = "desire "+next, func() { w.desired = next }
		case n < 4:
			op, fn = "deployment controller", func() { w.rollOut(ctx, 0.7) }
		case n < 7:
			op, fn = "reconcile", func() { _, _ = w.reconcile(ctx) }
		case n < 9:
			faultSeed, rate := w.rand.Int63(), 0.15
			op = fmt.Sprintf("reconcile with faults (seed %d)", faultSeed)
			fn = func() {
				w.c.InjectFaults(handofftest.RandomFaults(faultSeed, rate), "executor", "operator")
				_, _ = w.reconcile(ctx)
				w.c.DisableFaults()
			}
		default:
			k := 1 + w.rand.Intn(12)
			mode := handofftest.Mode(w.rand.Intn(2))
			op = fmt.Sprintf("reconcile stopped at its call %d (%s)", k, mode)
			fn = func() {
				w.c.InjectFaults(handofftest.FailNth(k, mode, nil), "executor", "operator")
				_, _ = w.reconcile(ctx)
				w.c.DisableFaults()
			}
		}
		if err := w.step(ctx, op, fn); err != nil {
			return err
		}
	}
	// Convergence: no faults, the deployment controller keeps up.
	settled := false
	for i := 0; i < 12 && !settled; i++ {
		var res handoff.Result
		var err error
		if e := w.step(ctx, "reconcile (converging)", func() { res, err = w.reconcile(ctx) }); e != nil {
			return e
		}
		// An error here (the generation's inventory not recorded yet
		// while an older one of the same name goes) is retried.
		settled = err == nil && !res.Requeue && len(res.Plan.Actions) == 0
		if e := w.step(ctx, "deployment controller (converging)", func() { w.rollOut(ctx, 1) }); e != nil {
			return e
		}
	}
	if !settled {
		return fmt.Errorf("I3: content %s not settled after 12 rounds", w.desired)
	}
	if err := w.checkConverged(); err != nil {
		return err
	}
	// Removal.
	w.desired = ""
	settled = false
	for i := 0; i < 6 && !settled; i++ {
		var res handoff.Result
		var err error
		if e := w.step(ctx, "removal", func() { res, err = w.reconcile(ctx) }); e != nil {
			return e
		}
		if err != nil {
			return fmt.Errorf("removal: %w", err)
		}
		settled = !res.Requeue
	}
	if !settled {
		return errors.New("removal not settled after 6 steps")
	}
	return w.checkRemoved()
}

// checkConverged is I2 and I3: the desired generation's inventories alone,
// one per part, what it lists there, and nothing only other generations
// listed, but what stays by design.
func (w *walk) checkConverged() error {
	g, err := w.inv.Generation(w.gen(), w.gens[w.desired])
	if err != nil {
		return err
	}
	var errs []error
	var parts []string
	for _, cm := range w.inventories() {
		parts = append(parts, cm.GetLabels()[inventory.GenerationLabel]+"/"+cm.GetLabels()[handoff.DefaultRoleLabel])
		if cm.GetDeletionTimestamp() != nil {
			errs = append(errs, fmt.Errorf("I3: inventory %s still deleting", cm.GetName()))
		}
	}
	var want []string
	for _, r := range g.Desired.Roles {
		want = append(want, w.gen()+"/"+r.Name)
	}
	slices.Sort(parts)
	slices.Sort(want)
	if !slices.Equal(parts, want) {
		errs = append(errs, fmt.Errorf("I2/I3: inventories %v, want %v", parts, want))
	}
	for _, objs := range w.gens {
		for i := range objs {
			k := handofftest.KeyOf(&objs[i])
			in := slices.Contains(w.listedBy(k), w.desired)
			switch exists := w.c.Exists(k); {
			case in && !exists:
				errs = append(errs, fmt.Errorf("I3: %s, listed by %s, is missing", k, w.desired))
			case !in && exists && k.Name != keepName && k.Name != "co-owned":
				errs = append(errs, fmt.Errorf("I3: %s, listed only by other generations, lingers", k))
			}
		}
	}
	return errors.Join(errs...)
}

// checkRemoved: after the removal no inventory is left, nothing the family
// installed is (but the kept object, released from the component object so
// its deletion does not take it, and the co-owned one), and the foreign
// objects are as they were.
func (w *walk) checkRemoved() error {
	var errs []error
	if inv := w.inventories(); len(inv) > 0 {
		errs = append(errs, fmt.Errorf("removal left %d inventories", len(inv)))
	}
	for _, objs := range w.gens {
		for i := range objs {
			k := handofftest.KeyOf(&objs[i])
			live, exists := w.c.Get(k)
			switch {
			case k.Name == keepName && exists:
				if slices.ContainsFunc(live.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == crUID }) {
					errs = append(errs, fmt.Errorf("%s, kept, is still owned by the component object", k))
				}
			case k.Name == "co-owned" && exists:
				if !slices.ContainsFunc(live.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == podUID }) {
					errs = append(errs, fmt.Errorf("%s lost its other owner", k))
				}
			case exists:
				errs = append(errs, fmt.Errorf("removal left %s", k))
			}
		}
	}
	for _, o := range foreignObjects() {
		if !w.c.Exists(handofftest.KeyOf(o)) {
			errs = append(errs, fmt.Errorf("I4: foreign %s gone", handofftest.KeyOf(o)))
		}
	}
	return errors.Join(errs...)
}

func TestInventoryWalks(t *testing.T) {
	n := *walks
	if testing.Short() {
		n = 20
	}
	failed := 0
	start := time.Now()
	sizes := map[walkSize]int{}
	took := map[walkSize]time.Duration{}
	for seed := int64(1); seed <= int64(n) && failed < 3; seed++ {
		began := time.Now()
		w := newWalk(t, seed)
		sizes[w.size]++
		// The co-owned ConfigMap has another owner from the start.
		co := handofftest.Object("v1", "ConfigMap", servingNS, "co-owned", nil, map[string]any{"data": map[string]any{"k": "co-owned"}})
		co.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: podUID}})
		if err := w.c.Add(co); err != nil {
			t.Fatal(err)
		}
		w.writes = len(w.c.Writes())
		if err := w.run(); err != nil {
			failed++
			t.Errorf("seed %d (%s): %v\nwalk:\n  %s", seed, w.size, err, strings.Join(w.log, "\n  "))
		}
		took[w.size] += time.Since(began)
	}
	t.Logf("%d walks of %d operations (and convergence, removal), %d with parts at the 10-part boundary (%s), %d with a part past the annotation limit (%s), %d violations, %s",
		n, walkOps, sizes[sizeParts], took[sizeParts].Round(time.Millisecond), sizes[sizeLimits], took[sizeLimits].Round(time.Millisecond),
		failed, time.Since(start).Round(time.Millisecond))
}

// An update in place that shrinks a generation from 13 parts to 6, the
// Deployments moving from part-11 to part-4 ("part-11" sorts before
// "part-4"), finishes: they are stamped for part-4, which rolls out, and
// the parts the generation dropped retire.
func TestInPlaceShrinkPastTenParts(t *testing.T) {
	ctx := context.Background()
	w := newWalkOf(t, 10, sizeParts)
	converge := func(content string) {
		t.Helper()
		w.desired = content
		for i := 0; i < 8; i++ {
			res, err := w.reconcile(ctx)
			w.rollOut(ctx, 1)
			if err == nil && !res.Requeue {
				if err := w.checkConverged(); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		res, err := w.reconcile(ctx)
		t.Fatalf("%s not settled after 8 rounds: %v\n%s", content, err, res.Plan)
	}
	converge("g2~grown")
	if n := len(w.inventories()); n != 13 {
		t.Fatalf("%d parts for g2~grown, want 13", n)
	}
	converge("g2~shrunk")
	if n := len(w.inventories()); n != 6 {
		t.Errorf("%d parts for g2~shrunk, want 6", n)
	}
}
