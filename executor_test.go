package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

const testNS = "comp-ns"

func mkObj(apiVersion, kind, ns, name, gen string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"data": map[string]any{"version": gen}}}
	u.SetName(name)
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

// small is a small component: static holds a Namespace (protected), two
// shared ConfigMaps, one generation-only ConfigMap and a shared webhook
// configuration; deployment holds one shared Deployment; statefulset holds
// the same Deployment and a StatefulSet.
func small(gen string) map[string][]*unstructured.Unstructured {
	dep := mkObj("apps/v1", "Deployment", testNS, "controller", gen)
	return map[string][]*unstructured.Unstructured{
		"static": {
			mkObj("v1", "Namespace", "", testNS, gen),
			mkObj("v1", "ConfigMap", testNS, "config-a", gen),
			mkObj("v1", "ConfigMap", testNS, "config-b", gen),
			mkObj("v1", "ConfigMap", testNS, "config-only-"+gen, gen),
			mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.webhook", gen),
		},
		"deployment":  {dep},
		"statefulset": {dep.DeepCopy(), mkObj("apps/v1", "StatefulSet", testNS, "store", gen)},
	}
}

var staticDeploy = []string{"static", "deployment"}

func keysOf(d *handoff.Desired) map[handofftest.Key]bool {
	out := map[handofftest.Key]bool{}
	for _, r := range d.Roles {
		for _, ref := range r.Resources {
			out[handofftest.Key{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}] = true
		}
	}
	return out
}

func shared(a, b *handoff.Desired) []handofftest.Key {
	kb := keysOf(b)
	var out []handofftest.Key
	for k := range keysOf(a) {
		if kb[k] {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(x, y handofftest.Key) int { return cmp_(x.String(), y.String()) })
	return out
}

func cmp_(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// newSmall returns a world with v1 installed and the desired v1 and v2.
func newSmall(t testing.TB) (*handofftest.World, *handoff.Desired, *handoff.Desired) {
	t.Helper()
	w := handofftest.NewWorld("Comp")
	v1 := w.Desire("v1", staticDeploy, small("v1"))
	v2 := w.Desire("v2", staticDeploy, small("v2"))
	if _, err := w.Converge(context.Background(), v1, 50); err != nil {
		t.Fatalf("install v1: %v", err)
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, v1); err != nil {
		t.Fatalf("install v1: %v", err)
	}
	return w, v1, v2
}

// checkUpgrade checks I1 over [start, now], I2/I3, obsolete gone, new exists.
func checkUpgrade(t testing.TB, w *handofftest.World, old, desired *handoff.Desired, start time.Time, label string) {
	t.Helper()
	if gaps := w.Cluster.Gaps(shared(old, desired), start, w.Cluster.Now()); len(gaps) != 0 {
		t.Errorf("%s: I1: %d gaps, want 0: %v", label, len(gaps), gaps)
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, desired); err != nil {
		t.Errorf("%s: %v", label, err)
	}
	nk := keysOf(desired)
	for k := range keysOf(old) {
		if !nk[k] && k.Kind != "Namespace" && w.Cluster.Exists(k) {
			t.Errorf("%s: obsolete %s still exists", label, k)
		}
	}
	for k := range nk {
		if !w.Cluster.Exists(k) {
			t.Errorf("%s: desired %s does not exist", label, k)
		}
	}
}

func TestUpgradeHappyAndRoleSwitch(t *testing.T) {
	ctx := context.Background()
	w, v1, v2 := newSmall(t)
	start := w.Cluster.Now()
	if _, err := w.Converge(ctx, v2, 50); err != nil {
		t.Fatal(err)
	}
	checkUpgrade(t, w, v1, v2, start, "v1→v2")

	v3 := w.Desire("v3", []string{"static", "statefulset"}, small("v3"))
	start = w.Cluster.Now()
	v2dep := w.Family.SetName("v2", "deployment")
	var gate handofftest.Gate
	if err := gate.Observe(w.Cluster, w.Family, *v3); err != nil {
		t.Fatal(err)
	}
	settled := false
	for i := 0; i < 50 && !settled; i++ {
		// Before the round: is every v3 set Ready? The v2 deployment set may
		// only begin deleting in a round that started with v3 Ready (I5).
		res, err := w.Round(ctx, v3)
		if err != nil {
			t.Fatal(err)
		}
		if err := gate.Observe(w.Cluster, w.Family, *v3); err != nil {
			t.Fatal(err)
		}
		settled = !res.Requeue
	}
	if !settled {
		t.Fatal("v2→v3 did not converge")
	}
	checkUpgrade(t, w, v2, v3, start, "v2→v3")
	if _, ok := w.Cluster.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: "TektonInstallerSet", Name: v2dep}); ok {
		t.Errorf("v2 deployment set %s still exists", v2dep)
	}
	dep := handofftest.Key{Group: "apps", Kind: "Deployment", Namespace: testNS, Name: "controller"}
	if gaps := w.Cluster.Gaps([]handofftest.Key{dep}, start, w.Cluster.Now()); len(gaps) != 0 {
		t.Errorf("Deployment listed by v2 deployment and v3 statefulset was absent: %v", gaps)
	}
}

func executorCalls(c *handofftest.Cluster, actor string) int {
	n := 0
	for k, v := range c.Calls() {
		if k.Actor == actor {
			n += v
		}
	}
	return n
}

// converge runs rounds with the I5 gate; after the first failed round the
// executor is replaced by a copy (a restart).
func convergeRestart(t testing.TB, w *handofftest.World, d *handoff.Desired, max int) error {
	var gate handofftest.Gate
	if err := gate.Observe(w.Cluster, w.Family, *d); err != nil {
		return err
	}
	restarted := false
	for i := 0; i < max; i++ {
		res, err := w.Round(context.Background(), d)
		if gerr := gate.Observe(w.Cluster, w.Family, *d); gerr != nil {
			return gerr
		}
		if err != nil {
			if !restarted {
				e := *w.Executor
				w.Executor = &e
				restarted = true
			}
			continue
		}
		if !res.Requeue {
			return nil
		}
	}
	return fmt.Errorf("not converged after %d rounds", max)
}

func TestUpgradeCrashAtEveryExecutorCall(t *testing.T) {
	w, _, v2 := newSmall(t)
	w.Cluster.ClearActions()
	if _, err := w.Converge(context.Background(), v2, 50); err != nil {
		t.Fatal(err)
	}
	E := executorCalls(w.Cluster, "executor")
	t.Logf("E = %d executor API calls for a v1→v2 upgrade", E)
	if E == 0 {
		t.Fatal("no executor calls")
	}
	for _, mode := range []handofftest.Mode{handofftest.BeforeCommit, handofftest.AfterCommit} {
		for i := 1; i <= E; i++ {
			w, v1, v2 := newSmall(t)
			w.Cluster.InjectFaults(handofftest.FailNth(i, mode, nil), "executor")
			start := w.Cluster.Now()
			if err := convergeRestart(t, w, v2, 60); err != nil {
				t.Errorf("fail call %d %s: %v", i, mode, err)
				continue
			}
			checkUpgrade(t, w, v1, v2, start, fmt.Sprintf("fail call %d %s", i, mode))
		}
	}
}

func TestUpgradeRandomFaults(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 50
	}
	for seed := 0; seed < n; seed++ {
		w, v1, v2 := newSmall(t)
		w.Cluster.InjectFaults(handofftest.RandomFaults(int64(seed), 0.2), "executor", "controller")
		start := w.Cluster.Now()
		if _, err := w.Converge(context.Background(), v2, 200); err != nil {
			t.Errorf("seed %d: %v", seed, err)
			continue
		}
		w.Cluster.DisableFaults()
		checkUpgrade(t, w, v1, v2, start, fmt.Sprintf("seed %d", seed))
		if t.Failed() {
			t.Fatalf("failing seed %d", seed)
		}
	}
}

func liveSetsPer(c *handofftest.Cluster, fam handoff.Family) map[string]int {
	out := map[string]int{}
	for _, o := range c.Objects() {
		if o.GetKind() != fam.Kind || !fam.Contains(o.GetLabels()) || o.GetDeletionTimestamp() != nil {
			continue
		}
		s, err := fam.Observe(o)
		if err != nil {
			continue
		}
		out[s.Generation+"/"+s.Role]++
	}
	return out
}

func TestUpgradeConcurrentExecutors(t *testing.T) {
	ctx := context.Background()
	for run := 0; run < 100; run++ {
		w, v1, v2 := newSmall(t)
		execs := make([]*handoff.Executor, 4)
		for i := range execs {
			e := *w.Executor
			e.Dynamic = w.Cluster.ClientFor(fmt.Sprintf("executor-%d", i))
			execs[i] = &e
		}
		start := w.Cluster.Now()
		var gate handofftest.Gate
		if err := gate.Observe(w.Cluster, w.Family, *v2); err != nil {
			t.Fatal(err)
		}
		settled := false
		for round := 0; round < 60 && !settled; round++ {
			var wg sync.WaitGroup
			results := make([]handoff.Result, len(execs))
			errs := make([]error, len(execs))
			for i, e := range execs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = e.Step(ctx, v2)
				}()
			}
			wg.Wait()
			_ = w.Controller.Reconcile(ctx)
			if err := gate.Observe(w.Cluster, w.Family, *v2); err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			for k, n := range liveSetsPer(w.Cluster, w.Family) {
				if n > 1 {
					t.Fatalf("run %d round %d: I2: %d live sets of %s", run, round, n, k)
				}
			}
			settled = true
			for i := range results {
				if errs[i] != nil || results[i].Requeue {
					settled = false
				}
			}
		}
		if !settled {
			t.Fatalf("run %d: not converged", run)
		}
		checkUpgrade(t, w, v1, v2, start, fmt.Sprintf("run %d", run))
	}
}

func TestUpgradeDesiredNeverReadyThenRollback(t *testing.T) {
	ctx := context.Background()
	w, v1, v2 := newSmall(t)
	w.Controller.ReadyWhen = func(_ context.Context, s *unstructured.Unstructured) (bool, error) {
		return s.GetLabels()[w.Family.GenerationLabel] != "v2", nil
	}
	start := w.Cluster.Now()
	var res handoff.Result
	for i := 0; i < 30; i++ {
		var err error
		if res, err = w.Round(ctx, v2); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range staticDeploy {
		name := w.Family.SetName("v1", role)
		o, ok := w.Cluster.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: "TektonInstallerSet", Name: name})
		if !ok || o.GetDeletionTimestamp() != nil {
			t.Errorf("v1 set %s: exists %v, want live", name, ok)
		}
	}
	if got := res.Plan.Of(handoff.ActionRetire); len(got) != 0 {
		t.Errorf("retires planned while v2 is not Ready: %v", got)
	}
	if !res.Requeue {
		t.Error("Requeue false while v2 is not Ready")
	}
	wantSet := w.Family.SetName("v2", "static")
	found := false
	for _, a := range res.Waiting {
		if a.Generation != "v2" {
			t.Errorf("Waiting names %v, not a v2 set", a)
		}
		found = found || a.Set == wantSet
	}
	if !found {
		t.Errorf("Waiting = %v, want a wait on %s", res.Waiting, wantSet)
	}

	// Rollback.
	if _, err := w.Converge(ctx, v1, 50); err != nil {
		t.Fatal(err)
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, v1); err != nil {
		t.Error(err)
	}
	if gaps := w.Cluster.Gaps(shared(v1, v2), start, w.Cluster.Now()); len(gaps) != 0 {
		t.Errorf("I1 during rollback: %v", gaps)
	}
	for _, o := range w.Cluster.Objects() {
		if o.GetKind() != "TektonInstallerSet" {
			continue
		}
		if o.GetLabels()[w.Family.GenerationLabel] != "v1" {
			t.Errorf("set %s remains after rollback", o.GetName())
		}
		if v, ok := o.GetAnnotations()[handoff.DefaultSupersededAnnotation]; ok {
			t.Errorf("v1 set %s still superseded by %q", o.GetName(), v)
		}
	}
}

func TestUpgradeComponentRemoval(t *testing.T) {
	ctx := context.Background()
	w, v1, _ := newSmall(t)
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.tekton.dev/v1alpha1", "kind": "TektonInstallerSet",
		"spec": map[string]any{"manifests": []any{mkObj("v1", "ConfigMap", testNS, "other-cm", "x").Object}}}}
	other.SetName("other-main-static")
	other.SetUID("decoy-set-uid")
	other.SetLabels(map[string]string{"operator.tekton.dev/created-by": "Other", "operator.tekton.dev/type": "main",
		"operator.tekton.dev/release-version": "v1", handoff.DefaultRoleLabel: "static"})
	otherCM := mkObj("v1", "ConfigMap", testNS, "other-cm", "x")
	otherCM.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: other.GetName(), UID: "decoy-set-uid"}})
	foreign := mkObj("v1", "ConfigMap", testNS, "foreign", "x")
	foreign.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: other.GetName(), UID: "decoy-set-uid"}})
	if err := w.Cluster.Add(other, otherCM, foreign); err != nil {
		t.Fatal(err)
	}
	decoys := []handofftest.Key{handofftest.KeyOf(other), handofftest.KeyOf(otherCM), handofftest.KeyOf(foreign)}
	before := map[handofftest.Key]*unstructured.Unstructured{}
	for _, k := range decoys {
		before[k], _ = w.Cluster.Get(k)
	}
	nw := len(w.Cluster.Writes())
	if _, err := w.Converge(ctx, nil, 50); err != nil {
		t.Fatal(err)
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, nil); err != nil {
		t.Error(err)
	}
	for k := range keysOf(v1) {
		if got := w.Cluster.Exists(k); got != (k.Kind == "Namespace") {
			t.Errorf("%s exists = %v after removal, want %v", k, got, k.Kind == "Namespace")
		}
	}
	for _, k := range decoys {
		after, ok := w.Cluster.Get(k)
		if !ok {
			t.Errorf("decoy %s deleted", k)
			continue
		}
		if d := cmp.Diff(before[k].Object, after.Object); d != "" {
			t.Errorf("decoy %s changed (-before +after):\n%s", k, d)
		}
	}
	for _, wr := range w.Cluster.Writes()[nw:] {
		if slices.Contains(decoys, wr.Key) {
			t.Errorf("write on decoy: %s", wr)
		}
	}
}

func TestUpgradeLegacyVersusExecutor(t *testing.T) {
	ctx := context.Background()
	longest := func(gs []handofftest.Gap) time.Duration {
		var m time.Duration
		for _, g := range gs {
			m = max(m, g.To.Sub(g.From))
		}
		return m
	}
	w, v1, v2 := newSmall(t)
	start := w.Cluster.Now()
	if _, err := w.ConvergeLegacy(ctx, v2, 50); err != nil {
		t.Fatal(err)
	}
	sh := shared(v1, v2)
	legacy := w.Cluster.Gaps(sh, start, w.Cluster.Now())
	// Today's finalizer deletes every listed resource but Namespaces (PVCs
	// and CRDs): one gap per other shared resource.
	gapped := map[handofftest.Key]bool{}
	for _, g := range legacy {
		gapped[g.Key] = true
	}
	for _, k := range sh {
		if want := k.Kind != "Namespace"; gapped[k] != want {
			t.Errorf("legacy flow: %s absent for a while: %v, want %v", k, gapped[k], want)
		}
	}
	w, v1, v2 = newSmall(t)
	start = w.Cluster.Now()
	if _, err := w.Converge(ctx, v2, 50); err != nil {
		t.Fatal(err)
	}
	ours := w.Cluster.Gaps(shared(v1, v2), start, w.Cluster.Now())
	if len(ours) != 0 {
		t.Errorf("executor flow: %d gaps, want 0: %v", len(ours), ours)
	}
	t.Logf("legacy: %d gaps, longest %s; executor: %d gaps, longest %s", len(legacy), longest(legacy), len(ours), longest(ours))
}

func TestExecutorDryRun(t *testing.T) {
	w, _, v2 := newSmall(t)
	e := *w.Executor
	e.DryRun = true
	n := len(w.Cluster.Writes())
	res, err := e.Step(context.Background(), v2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Writes) == 0 {
		t.Error("dry run: no writes reported for an upgrade")
	}
	if got := len(w.Cluster.Writes()); got != n {
		t.Errorf("dry run wrote: %d writes, want %d", got, n)
	}
}

// A retirement whose ownership handover fails names the set it was
// retiring and the resource it could not reach, and deletes nothing. RBAC
// grants neither list nor get on Deployments: the forbidden List falls
// back to Gets, which are forbidden too.
func TestExecutorRetireHandoverFailure(t *testing.T) {
	ctx := context.Background()
	w, _, v2 := newSmall(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "controller", errors.New("no get"))
	w.Cluster.InjectFaults(func(c handofftest.Call) handofftest.Fault {
		if (c.Verb == "get" || c.Verb == "list") && c.Resource.Resource == "deployments" {
			return handofftest.Fault{Err: forbidden}
		}
		return handofftest.Fault{}
	}, "executor")
	var err error
	for range 20 {
		if _, err = w.Round(ctx, v2); err != nil {
			break
		}
	}
	var se *handoff.SetError
	var re *handoff.ResourceError
	retiring := w.Family.SetName("v1", "deployment")
	if !errors.As(err, &se) || se.Name != retiring || !errors.As(err, &re) || re.Ref.Kind != "Deployment" || !apierrors.IsForbidden(err) {
		t.Fatalf("error %v: want a *SetError naming %s around a Forbidden *ResourceError naming the Deployment", err, retiring)
	}
	for _, o := range w.Cluster.Objects() {
		if o.GetKind() == "TektonInstallerSet" && o.GetDeletionTimestamp() != nil {
			t.Errorf("set %s was retired although its handover failed", o.GetName())
		}
	}
}

func TestExecutorSteadyStateOneList(t *testing.T) {
	w, v1, _ := newSmall(t)
	w.Cluster.ClearActions()
	res, err := w.Executor.Step(context.Background(), v1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requeue || len(res.Writes) != 0 {
		t.Errorf("steady Step: requeue %v, writes %v", res.Requeue, res.Writes)
	}
	got := map[handofftest.CallKey]int{}
	for k, v := range w.Cluster.Calls() {
		if k.Actor == "executor" {
			got[k] = v
		}
	}
	want := map[handofftest.CallKey]int{{Actor: "executor", Verb: "list"}: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

func TestFinalizeHandsOverSharedAndDeletesObsolete(t *testing.T) {
	ctx := context.Background()
	w, _, v2 := newSmall(t)
	// One executor step creates the v2 static set (not yet reconciled).
	if _, err := w.Executor.Step(ctx, v2); err != nil {
		t.Fatal(err)
	}
	setKey := func(gen string) handofftest.Key {
		return handofftest.Key{Group: "operator.tekton.dev", Kind: "TektonInstallerSet", Name: w.Family.SetName(gen, "static")}
	}
	old, ok := w.Cluster.Get(setKey("v1"))
	if !ok {
		t.Fatal("no v1 static set")
	}
	succ, ok := w.Cluster.Get(setKey("v2"))
	if !ok {
		t.Fatal("no v2 static set")
	}
	res, err := w.Executor.Finalize(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	refs := func(items []handoff.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Ref.Kind+" "+it.Ref.Name)
		}
		slices.Sort(out)
		return out
	}
	// The ConfigMaps were v1's and move to v2. The Namespace and the webhook
	// configuration have no owner (as tektoncd/operator installs them) and
	// v2 lists them: kept, but nothing was handed over, and the result
	// must not say it was.
	if d := cmp.Diff([]string{"ConfigMap config-a", "ConfigMap config-b"}, refs(res.HandedOver)); d != "" {
		t.Errorf("HandedOver (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Namespace comp-ns", "ValidatingWebhookConfiguration validation.webhook"}, refs(res.Kept)); d != "" {
		t.Errorf("Kept (-want +got):\n%s", d)
	}
	// config-only-v1 is v1's alone: no write, the garbage collector takes
	// it with the set.
	if d := cmp.Diff([]string{"ConfigMap config-only-v1"}, refs(res.Collected)); d != "" {
		t.Errorf("Collected (-want +got):\n%s", d)
	}
	if len(res.Deleted) != 0 {
		t.Errorf("Deleted %v, want nothing: the garbage collector does it", res.Deleted)
	}
	cm, _ := w.Cluster.Get(handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "config-a"})
	var owners []string
	for _, r := range cm.GetOwnerReferences() {
		owners = append(owners, r.Name+"/"+string(r.UID))
	}
	if d := cmp.Diff([]string{succ.GetName() + "/" + string(succ.GetUID())}, owners); d != "" {
		t.Errorf("config-a owners (-want +got):\n%s", d)
	}
	n := len(w.Cluster.Writes())
	again, err := w.Executor.Finalize(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Writes) != 0 || len(w.Cluster.Writes()) != n {
		t.Errorf("second Finalize wrote: %v (cluster writes %d, want %d)", again.Writes, len(w.Cluster.Writes()), n)
	}
	obsolete := handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "config-only-v1"}
	if !w.Cluster.Exists(obsolete) {
		t.Fatal("config-only-v1 is gone while its set still exists: who deleted it?")
	}
	sets := w.Cluster.ClientFor("test").Resource(handofftest.SetResource)
	if err := sets.Delete(ctx, old.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sets.Patch(ctx, old.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	w.Cluster.CollectGarbage()
	if w.Cluster.Exists(obsolete) {
		t.Error("config-only-v1 outlived its set")
	}
	if !w.Cluster.Exists(handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "config-a"}) {
		t.Error("config-a was collected with the old set")
	}
}

// An update in place that moves objects to another namespace (tekton: a
// component's targetNamespace changed, same release) prunes what the set
// no longer lists, once the set is Ready for its new spec: the objects in
// the old namespace go, and only after their replacements exist; an
// object the update keeps is never absent.
func TestUpdateInPlacePrunesWhatItDropped(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("Comp")
	at := func(ns string) map[string][]*unstructured.Unstructured {
		return map[string][]*unstructured.Unstructured{"static": {mkObj("v1", "ConfigMap", ns, "moved", "v1"), mkObj("v1", "ConfigMap", testNS, "stays", "v1")}}
	}
	if _, err := w.Converge(ctx, w.DesireHashed("v1", []string{"static"}, at("old-ns")), 30); err != nil {
		t.Fatal(err)
	}
	oldKey := handofftest.Key{Kind: "ConfigMap", Namespace: "old-ns", Name: "moved"}
	newKey := handofftest.Key{Kind: "ConfigMap", Namespace: "new-ns", Name: "moved"}
	staysKey := handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "stays"}
	if !w.Cluster.Exists(oldKey) {
		t.Fatal("v1 did not install the ConfigMap in old-ns")
	}
	moved := w.DesireHashed("v1", []string{"static"}, at("new-ns"))
	if _, err := w.Converge(ctx, moved, 30); err != nil {
		t.Fatal(err)
	}
	if w.Cluster.Exists(oldKey) || !w.Cluster.Exists(newKey) {
		t.Fatalf("after the move: old-ns present %v, new-ns present %v; want only new-ns", w.Cluster.Exists(oldKey), w.Cluster.Exists(newKey))
	}
	gone, made := w.Cluster.Timeline(oldKey), w.Cluster.Timeline(newKey)
	if len(gone) != 1 || len(made) != 1 || gone[0].To.Before(made[0].From) {
		t.Errorf("old-ns copy removed %v, new-ns copy created %v: want the removal after the creation", gone, made)
	}
	if tl := w.Cluster.Timeline(staysKey); len(tl) != 1 || !tl[0].To.IsZero() {
		t.Errorf("the ConfigMap both specs list has lifetimes %+v, want one that has not ended", tl)
	}
	set, ok := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet", Name: w.Family.SetName("v1", "static")})
	if !ok {
		t.Fatal("no set")
	}
	if v, ok := set.GetAnnotations()[handoff.DroppedAnnotation]; ok {
		t.Errorf("the set still records dropped resources: %s", v)
	}
}

// A Step's Result says what its retirements did with each resource the
// retired sets list; what no live set lists is left to the sets'
// finalizer (the set controller's Finalize), which reports it.
func TestStepReportsWhatItsRetirementsDid(t *testing.T) {
	ctx := context.Background()
	w, _, v2 := newSmall(t)
	got := map[string][]string{}
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatal("v2 not converged after 20 rounds")
		}
		res, err := w.Round(ctx, v2)
		if err != nil {
			t.Fatal(err)
		}
		for field, items := range map[string][]handoff.Item{"Deleted": res.Deleted, "Collected": res.Collected,
			"HandedOver": res.HandedOver, "Kept": res.Kept, "Skipped": res.Skipped, "Unserved": res.Unserved} {
			for _, it := range items {
				got[field] = append(got[field], it.String())
			}
		}
		if !res.Requeue {
			break
		}
	}
	static, deploy := w.Family.SetName("v2", "static"), w.Family.SetName("v2", "deployment")
	listed := func(set, role string) string { return fmt.Sprintf(": listed by %s (v2/%s)", set, role) }
	// Workloads first. The set controller applied v2 before it was Ready,
	// and moved what v2 lists to v2's sets: the retirement had nothing to
	// hand over. config-only-v1, which v2 does not list, is the
	// finalizer's to delete.
	want := map[string][]string{
		"Kept": {
			"Keep Deployment.apps comp-ns/controller" + listed(deploy, "deployment"),
			"Keep Namespace comp-ns" + listed(static, "static"),
			"Keep ConfigMap comp-ns/config-a" + listed(static, "static"),
			"Keep ConfigMap comp-ns/config-b" + listed(static, "static"),
			"Keep ValidatingWebhookConfiguration.admissionregistration.k8s.io validation.webhook" + listed(static, "static"),
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("what the retirements reported (-want +got):\n%s", d)
	}
}

// A set without a finalizer is finalized by the Step that retires it: the
// Result then holds every resource it listed, each once, with what became
// of it and why.
func TestStepReportsWhatItFinalized(t *testing.T) {
	f := newFixture(t, handofftest.WithoutAutoGC())
	shared := cm("shared")
	hook := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "only-v1.webhook", "")
	pvc := mkObj("v1", "PersistentVolumeClaim", testNS, "data", "")
	kept := cm("kept")
	kept.SetAnnotations(map[string]string{handoff.DefaultKeepAnnotation: handoff.KeepValue})
	obsolete := cm("obsolete")
	foreign := cm("foreign")
	foreign.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-pod"}})
	unowned := cm("unowned")
	v1 := []*unstructured.Unstructured{shared, hook, pvc, kept, obsolete, foreign, unowned}
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: v1},
		{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{shared}},
	}, v1, map[string]string{"shared": "static-v1", "data": "static-v1", "kept": "static-v1", "obsolete": "static-v1"})

	res, err := f.exec.Step(context.Background(), desired("v2", "static"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for field, items := range map[string][]handoff.Item{"Deleted": res.Deleted, "Collected": res.Collected,
		"HandedOver": res.HandedOver, "Kept": res.Kept, "Skipped": res.Skipped, "Unserved": res.Unserved} {
		for _, it := range items {
			s := it.String()
			if it.Detached {
				s += " (detached)"
			}
			got[field] = append(got[field], s)
		}
	}
	want := map[string][]string{
		"HandedOver": {"Keep ConfigMap comp-ns/shared: listed by static-v2 (v2/static)"},
		"Skipped": {
			"Skip PersistentVolumeClaim comp-ns/data: protected kind (detached)",
			"Skip ConfigMap comp-ns/kept: annotated handoff.kube-handoff.io/on-remove=keep (detached)",
			"Skip ConfigMap comp-ns/foreign: owned by an object outside the family",
			"Skip ConfigMap comp-ns/unowned: has no owner and its kind is not installed without one",
		},
		"Deleted":   {"Delete ValidatingWebhookConfiguration.admissionregistration.k8s.io only-v1.webhook: installed without an owner, listed by no other set"},
		"Collected": {"Delete ConfigMap comp-ns/obsolete: owned by static-v1 alone, listed by no other set: left to the garbage collector"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("what the Step reported (-want +got):\n%s", d)
	}
}

// A Desired's Build makes its sets, in place of the executor's: one
// executor serves every generation, each Desired bringing the manifests
// it is built from. Without either, the Step refuses before any call.
func TestDesiredBuildTakesPrecedence(t *testing.T) {
	w := handofftest.NewWorld("TektonPipeline")
	d := w.Desire("v1", []string{"static"}, small("v1"))
	var built []string
	byDesired := *d
	byDesired.Build = func(ctx context.Context, des handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
		built = append(built, des.Generation+"/"+r.Name)
		return w.Manifests.Build(ctx, des, r)
	}
	w.Executor.Build = func(context.Context, handoff.Desired, handoff.Role) (*unstructured.Unstructured, error) {
		t.Error("the executor's Build was called although the Desired has one")
		return nil, errors.New("not this one")
	}
	if _, err := w.Executor.Step(context.Background(), &byDesired); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"v1/static"}, built); d != "" {
		t.Errorf("sets built by the Desired's Build (-want +got):\n%s", d)
	}

	w.Executor.Build = nil
	calls := len(w.Cluster.Actions())
	_, err := w.Executor.Step(context.Background(), d)
	var ce *handoff.ConfigError
	if !errors.As(err, &ce) || !slices.Contains(ce.Fields(), "Executor.Build") {
		t.Fatalf("Step with no Build anywhere: %v, want a *ConfigError naming Executor.Build", err)
	}
	if got := w.Cluster.Actions()[calls:]; len(got) != 0 {
		t.Errorf("a Step with no Build made calls: %v", got)
	}
}

// Result.Family is the family as the Step left it: the set it created is
// in it, so an operator stamps what it applies next without a List.
func TestResultFamilyHasTheStepsWrites(t *testing.T) {
	w := handofftest.NewWorld("TektonPipeline")
	v1 := w.Desire("v1", []string{"static"}, small("v1"))
	res, err := w.Executor.Step(context.Background(), v1)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Plan.Of(handoff.ActionCreate)); n != 1 {
		t.Fatalf("plan %v, want one create", res.Plan)
	}
	if len(res.Family) != 1 || res.Family[0].UID == "" {
		t.Fatalf("Result.Family = %v, want the created set with its UID", res.Family)
	}
	live, ok := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet", Name: res.Family[0].Name})
	if !ok || live.GetUID() != res.Family[0].UID {
		t.Errorf("Result.Family's %s has UID %s, the cluster's %v", res.Family[0].Name, res.Family[0].UID, live)
	}
	if got := res.Family[0].Generation; got != "v1" {
		t.Errorf("Result.Family's set has generation %q, want v1", got)
	}
}

// Record carries out what Step would but its retirements: the desired
// generation is created and gets Ready beside the old one, which stays with
// all it lists, the retirement held in the plan, until a Step carries it
// out. A Record with no desired generation is a configuration error that
// makes no call.
func TestRecordRetiresNothing(t *testing.T) {
	ctx := context.Background()
	w, v1, v2 := newSmall(t)
	from := len(w.Cluster.Writes())
	var res handoff.Result
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatalf("v2 not Ready after 20 Records: plan %s", res.Plan)
		}
		var err error
		if res, err = w.Executor.Record(ctx, v2); err != nil {
			t.Fatal(err)
		}
		if len(res.Plan.Of(handoff.ActionRetire)) > 0 {
			break
		}
		if err := w.Controller.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !res.Requeue {
		t.Error("Record held back a retirement, yet Requeue is false")
	}
	for _, wr := range w.Cluster.WritesSince(from) {
		if wr.Actor == "executor" && (wr.Verb == "delete" || wr.Verb == "deletecollection") {
			t.Errorf("Record deleted: %s", wr)
		}
	}
	for _, role := range staticDeploy {
		set, ok := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet", Name: w.Family.SetName("v1", role)})
		if !ok || set.GetDeletionTimestamp() != nil {
			t.Errorf("v1's %s set gone or deleting after Record", role)
		}
	}
	for k := range keysOf(v1) {
		if !w.Cluster.Exists(k) {
			t.Errorf("%s, listed by v1 only or by both, gone after Record", k)
		}
	}
	res, err := w.Executor.Step(ctx, v2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Of(handoff.ActionRetire)) == 0 {
		t.Errorf("the Step after the Records retired nothing: plan %s", res.Plan)
	}

	calls := executorCalls(w.Cluster, "executor")
	var cerr *handoff.ConfigError
	if _, err := w.Executor.Record(ctx, nil); !errors.As(err, &cerr) {
		t.Errorf("Record(ctx, nil) = %v, want a *ConfigError", err)
	}
	if n := executorCalls(w.Cluster, "executor"); n != calls {
		t.Errorf("Record(ctx, nil) made %d calls", n-calls)
	}
}
