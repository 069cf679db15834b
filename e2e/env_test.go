//go:build e2e

// Package e2e runs handoff against a real kube-apiserver, etcd and
// kube-controller-manager (garbage collector, deployment and replicaset
// controllers): hack/e2e.sh builds them and runs these tests.
//
// Each scenario is one component (its own namespace, family selector and
// cluster-scoped names) in the one control plane of the test binary. A set
// controller (handofftest.SetController) applies each set's manifests with
// an ownerReference to the set, honours the coexistence guard, calls
// Executor.Finalize from a real finalizer, and marks a set Ready only when
// the Deployments it lists are Available for their current generation,
// as the real deployment controller reports them. A watch-based monitor
// records every event of every object in the scenario.
package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/internal/controlplane"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

const setCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: tektoninstallersets.operator.tekton.dev
spec:
  group: operator.tekton.dev
  scope: Cluster
  names:
    plural: tektoninstallersets
    singular: tektoninstallerset
    kind: TektonInstallerSet
    listKind: TektonInstallerSetList
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	var err error
	cp, err = controlplane.Start(context.Background(), controlplane.Options{CRDs: [][]byte{[]byte(setCRD)}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cp.Stop()
	os.Exit(code)
}

type kindInfo struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
}

// kinds are every kind a scenario's sets list, and the sets themselves; the
// monitor watches them all.
var kinds = []kindInfo{
	{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
	{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", true},
	{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, "serviceaccounts", true},
	{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, "services", true},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", true},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", false},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, "clusterrolebindings", false},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}, "validatingwebhookconfigurations", false},
	{schema.GroupVersionKind{Group: "operator.tekton.dev", Version: "v1alpha1", Kind: "TektonInstallerSet"}, "tektoninstallersets", false},
}

const setKind = "TektonInstallerSet"

var (
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func newMapper() meta.RESTMapper {
	var gvs []schema.GroupVersion
	for _, k := range kinds {
		gvs = append(gvs, k.gvk.GroupVersion())
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for _, k := range kinds {
		scope := meta.RESTScopeRoot
		if k.namespaced {
			scope = meta.RESTScopeNamespace
		}
		m.AddSpecific(k.gvk, k.gvk.GroupVersion().WithResource(k.resource), k.gvk.GroupVersion().WithResource(k.resource[:len(k.resource)-1]), scope)
	}
	return m
}

// versionLabel carries the generation whose content an object holds.
const versionLabel = "app.kubernetes.io/version"

// component returns the manifests of a small component by role; suffix
// keeps cluster-scoped names apart between scenarios. Every generation
// lists the same 22 resources with content of its own, plus one ConfigMap
// only it lists (config-only-<gen>).
func component(ns, suffix, gen string) map[string][]*unstructured.Unstructured {
	lbls := map[string]string{"app.kubernetes.io/part-of": "e2e", versionLabel: gen}
	obj := func(apiVersion, kind, namespace, name string, body map[string]any) *unstructured.Unstructured {
		return handofftest.Object(apiVersion, kind, namespace, name, lbls, body)
	}
	var static, deploy []*unstructured.Unstructured
	for i := range 16 {
		static = append(static, obj("v1", "ConfigMap", ns, fmt.Sprintf("config-%02d", i), map[string]any{"data": map[string]any{"version": gen}}))
	}
	static = append(static, obj("v1", "ConfigMap", ns, onlyIn(gen), map[string]any{"data": map[string]any{"version": gen}}))
	static = append(static, obj("v1", "ServiceAccount", ns, "e2e-controller", nil))
	role := "e2e-role-" + suffix
	static = append(static, obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", role, map[string]any{"rules": []any{
		map[string]any{"apiGroups": []any{"e2e.example.com"}, "resources": []any{"things-" + gen}, "verbs": []any{"get"}}}}))
	static = append(static, obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", role, map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "e2e-controller", "namespace": ns}}}))
	static = append(static, obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "e2e-webhook-"+suffix, webhookBody(gen)))
	labels := map[string]any{"app": "e2e-controller"}
	deploy = append(deploy, obj("apps/v1", "Deployment", ns, "e2e-controller", map[string]any{"spec": map[string]any{
		"replicas": int64(0),
		"selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
			"containers": []any{map[string]any{"name": "main", "image": "example.com/e2e:" + gen}}}}}}))
	deploy = append(deploy, obj("v1", "Service", ns, "e2e-controller", map[string]any{"spec": map[string]any{
		"selector": labels, "ports": []any{map[string]any{"port": int64(9090), "name": "http-" + gen}}}}))
	return map[string][]*unstructured.Unstructured{"static": static, "deployment": deploy}
}

// onlyIn names the ConfigMap that only generation gen lists.
func onlyIn(gen string) string { return "config-only-" + gen }

// neverAvailable makes the component's Deployment ask for one replica: with
// no scheduler and no kubelet it never becomes Available, so the set that
// lists it never gets Ready.
func neverAvailable(ms map[string][]*unstructured.Unstructured) {
	for _, m := range ms["deployment"] {
		if m.GetKind() == "Deployment" {
			_ = unstructured.SetNestedField(m.Object, int64(1), "spec", "replicas")
		}
	}
}

func keyOf(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

type event struct {
	seq    int // the order the monitor received events in
	typ    watch.EventType
	at     time.Time
	uid    types.UID
	labels map[string]string
	obj    *unstructured.Unstructured
}

// monitor records watch events per object key.
type monitor struct {
	mu     sync.Mutex
	seq    int
	events map[string][]event
}

func startMonitor(t testing.TB, ctx context.Context, dyn dynamic.Interface) *monitor {
	t.Helper()
	m := &monitor{events: map[string][]event{}}
	var ready sync.WaitGroup
	for _, k := range kinds {
		ready.Add(1)
		gvr := k.gvk.GroupVersion().WithResource(k.resource)
		go func() {
			first := true
			rv := ""
			for ctx.Err() == nil {
				w, err := dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
				if first {
					ready.Done()
					first = false
				}
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				for ev := range w.ResultChan() {
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok {
						rv = "" // an Error event: start again from now
						continue
					}
					rv = u.GetResourceVersion()
					if ev.Type == watch.Bookmark {
						continue
					}
					u.SetKind(k.gvk.Kind)
					m.mu.Lock()
					m.seq++
					m.events[keyOf(u)] = append(m.events[keyOf(u)], event{m.seq, ev.Type, time.Now(), u.GetUID(), u.GetLabels(), u})
					m.mu.Unlock()
				}
				w.Stop()
			}
		}()
	}
	ready.Wait()
	return m
}

// stats reports, for the keys and events after since, how many keys saw a
// DELETED event and the longest DELETED→ADDED gap.
func (m *monitor) stats(keys []string, since time.Time) (deleted []string, longest time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		var del time.Time
		seen := false
		for _, e := range m.events[k] {
			if e.at.Before(since) {
				continue
			}
			switch e.typ {
			case watch.Deleted:
				del = e.at
				if !seen {
					deleted = append(deleted, k)
					seen = true
				}
			case watch.Added:
				if !del.IsZero() {
					longest = max(longest, e.at.Sub(del))
					del = time.Time{}
				}
			}
		}
		if !del.IsZero() {
			longest = max(longest, time.Since(del))
		}
	}
	return deleted, longest
}

// since returns the events of key at or after t.
func (m *monitor) since(key string, t time.Time) []event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []event
	for _, e := range m.events[key] {
		if !e.at.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// writes counts the MODIFIED events of key after t that changed more than
// status: what the object holds, its labels, annotations or owners.
func (m *monitor) writes(key string, t time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	var prev map[string]any
	for _, e := range m.events[key] {
		cur := content(e.obj)
		if e.typ == watch.Modified && !e.at.Before(t) && !equality.Semantic.DeepEqual(prev, cur) {
			n++
		}
		prev = cur
	}
	return n
}

// content is an object without its status and the metadata the API server
// keeps.
func content(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "status")
	for _, f := range []string{"resourceVersion", "generation", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	return c.Object
}

// gating checks I5 from the event stream of the family's sets, which one
// watch delivers in the API server's order: whenever a set outside the
// desired generation began deleting between from and to, every desired role
// had a live set that was Ready for its current spec, as last seen before.
// Unlike handofftest.Gate, it holds however the executor and the set
// controller interleave.
func (m *monitor) gating(fam handoff.Family, desired *handoff.Desired, from, to time.Time) []error {
	m.mu.Lock()
	var evs []event
	for _, es := range m.events {
		for _, e := range es {
			if e.obj.GetKind() == fam.Kind && fam.Contains(e.labels) {
				evs = append(evs, e)
			}
		}
	}
	m.mu.Unlock()
	slices.SortFunc(evs, func(a, b event) int { return a.seq - b.seq })

	var errs []error
	last := map[string]handoff.Set{} // by set name, deleted sets removed
	for _, e := range evs {
		s, err := fam.Observe(e.obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		was, existed := last[s.Name]
		if e.typ == watch.Deleted {
			delete(last, s.Name)
		} else {
			last[s.Name] = s
		}
		mine := slices.ContainsFunc(desired.Roles, func(r handoff.Role) bool { return r.Name == s.Role }) && s.Generation == desired.Generation
		began := (s.Deleting || e.typ == watch.Deleted) && !(existed && was.Deleting)
		if mine || !began || e.at.Before(from) || e.at.After(to) {
			continue
		}
		var notReady []string
		for _, r := range desired.Roles {
			ready := false
			for _, o := range last {
				ready = ready || (o.Generation == desired.Generation && o.Role == r.Name && !o.Deleting && o.Readiness.State == handoff.Ready)
			}
			if !ready {
				notReady = append(notReady, r.Name)
			}
		}
		if len(notReady) > 0 {
			errs = append(errs, fmt.Errorf("I5: old set %s began deleting while roles %v of %s were not Ready", s.Name, notReady, desired.Generation))
		}
	}
	return errs
}

// setUIDs returns, for every (generation, role) of the family's sets seen
// after t, the UIDs of the sets the monitor saw with it.
func (m *monitor) setUIDs(fam handoff.Family, t time.Time) map[string]map[types.UID]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[types.UID]bool{}
	sel := fam.LabelSelector()
	for _, evs := range m.events {
		for _, e := range evs {
			if e.at.Before(t) || e.labels == nil || !sel.Matches(labels.Set(e.labels)) {
				continue
			}
			id := e.labels[fam.GenerationLabel] + "/" + e.labels[handoff.DefaultRoleLabel]
			if out[id] == nil {
				out[id] = map[types.UID]bool{}
			}
			out[id][e.uid] = true
		}
	}
	return out
}

type env struct {
	t          testing.TB
	dyn        dynamic.Interface
	mapper     meta.RESTMapper
	ns, suffix string
	fam        handoff.Family
	prop       metav1.DeletionPropagation
	exec       *handoff.Executor
	ctrl       *handofftest.SetController
	manifests  handofftest.Catalog
	writes     int
}

// newEnv makes the component "e2e-<name>": its namespace, family, an
// executor and a set controller, both as the admin identity.
func newEnv(t testing.TB, name string, prop metav1.DeletionPropagation) *env {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dyn: dyn, mapper: newMapper(), ns: "e2e-" + name, suffix: name, prop: prop,
		manifests: handofftest.Catalog{}}
	e.fam = handoff.Family{
		Resource:        handofftest.SetResource,
		Kind:            setKind,
		Selector:        map[string]string{"operator.tekton.dev/created-by": "e2e-" + name, "operator.tekton.dev/type": "main"},
		GenerationLabel: "operator.tekton.dev/release-version",
		HashAnnotation:  "operator.tekton.dev/last-applied-hash",
		NamePrefix:      "e2e-" + name + "-main-",
	}
	e.exec = e.executor(dyn)
	prune := e.exec.Prune
	e.ctrl = &handofftest.SetController{Executor: e.executor(dyn), Client: dyn, Mapper: e.mapper,
		Finalizer: "tektoninstallersets.operator.tekton.dev", ReadyAfter: 1, ReadyWhen: e.deploymentsAvailable,
		// As tektoncd/operator: no ownerReference on CRDs, Namespaces and
		// admission webhook configurations.
		Unowned: append([]schema.GroupKind{{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, {Kind: "Namespace"}}, prune.Unowned...)}
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": e.ns}}}
	if _, err := dyn.Resource(namespaces).Create(context.Background(), nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return e
}

// executor returns a new executor of the env's family that talks to the
// cluster through dyn.
func (e *env) executor(dyn dynamic.Interface) *handoff.Executor {
	return &handoff.Executor{Family: e.fam, Dynamic: dyn, Mapper: e.mapper, Prune: handoff.DefaultPruneOptions(),
		RoleOrder: []string{"static", "deployment"}, Propagation: e.prop, Build: e.manifests.Build}
}

// desire registers generation gen of the component, changed by edits, and
// returns it as the desired generation.
func (e *env) desire(gen string, edits ...func(map[string][]*unstructured.Unstructured)) *handoff.Desired {
	ms := component(e.ns, e.suffix, gen)
	for _, edit := range edits {
		edit(ms)
	}
	return e.manifests.Desire(gen, []string{"static", "deployment"}, ms)
}

// deploymentsAvailable is the set controller's readiness rule: every
// Deployment the set lists exists and is Available for its current
// generation, as the deployment controller reports it.
func (e *env) deploymentsAvailable(ctx context.Context, set *unstructured.Unstructured) (bool, error) {
	manifests, _, err := unstructured.NestedSlice(set.Object, "spec", "manifests")
	if err != nil {
		return false, err
	}
	for _, m := range manifests {
		u := &unstructured.Unstructured{Object: m.(map[string]any)}
		if u.GetKind() != "Deployment" {
			continue
		}
		live, err := e.dyn.Resource(deployments).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if (handoff.ConditionProbe{Type: "Available"}).Ready(live).State != handoff.Ready {
			return false, nil
		}
	}
	return true, nil
}

func (e *env) sets(ctx context.Context) ([]handoff.Set, error) {
	list, err := e.dyn.Resource(e.fam.Resource).List(ctx, metav1.ListOptions{LabelSelector: e.fam.LabelSelector().String()})
	if err != nil {
		return nil, err
	}
	return e.fam.ObserveAll(list.Items)
}

// converge runs the env's executor and set controller in lockstep, Step
// then Reconcile, until the plan is settled and no set is deleting.
func (e *env) converge(ctx context.Context, d *handoff.Desired) {
	e.t.Helper()
	e.drive(ctx, e.exec, d, e.ctrl.Reconcile)
}

// drive steps exec (and calls reconcile, if not nil, after each step) until
// the plan is settled and no set of the family is deleting, or ctx ends.
// With reconcile, nothing else changes the sets between rounds, so it
// checks I5 with handofftest.Gate from the first round on (with a set
// controller running on its own, monitor.gating checks I5). Errors of
// single rounds are logged and retried; it fails the test after 60 s.
func (e *env) drive(ctx context.Context, exec *handoff.Executor, d *handoff.Desired, reconcile func(context.Context) error) {
	e.t.Helper()
	var gate handofftest.Gate
	if d != nil && reconcile != nil {
		// The state before the first round, so that the first round is
		// checked too.
		sets, err := e.sets(ctx)
		if err != nil {
			e.t.Fatalf("list sets: %v", err)
		}
		if gerr := gate.Check(sets, *d); gerr != nil {
			e.t.Errorf("before the first round: %v", gerr)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for rounds := 1; ; rounds++ {
		if time.Now().After(deadline) {
			e.t.Fatalf("not converged after 60s (%d rounds)", rounds)
		}
		res, err := exec.Step(ctx, d)
		e.writes += len(res.Writes)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.t.Logf("round %d: step: %v (retrying)", rounds, err)
		}
		if reconcile != nil {
			if cerr := reconcile(ctx); cerr != nil {
				e.t.Logf("round %d: reconcile: %v (retrying)", rounds, cerr)
				err = cerr
			}
		}
		sets, lerr := e.sets(ctx)
		if lerr != nil {
			e.t.Logf("round %d: list sets: %v (retrying)", rounds, lerr)
			err = lerr
		} else if d != nil && reconcile != nil {
			if gerr := gate.Check(sets, *d); gerr != nil {
				e.t.Errorf("round %d: %v", rounds, gerr)
			}
		}
		if err == nil && !res.Requeue && !deleting(sets) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleting reports whether one of the sets is being deleted.
func deleting(sets []handoff.Set) bool {
	for _, s := range sets {
		if s.Deleting {
			return true
		}
	}
	return false
}

// runController runs the set controller in its own goroutine, one pass
// every 50 ms, as an operator's set controller runs beside the component
// reconciler, until the returned stop is called. Passes that fail (a
// conflict with the executor) are simply retried by the next pass.
func (e *env) runController(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_ = e.ctrl.Reconcile(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// resource returns the client for objects of u's kind in u's namespace.
func (e *env) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	m, err := e.mapper.RESTMapping(u.GroupVersionKind().GroupKind())
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return e.dyn.Resource(m.Resource), nil
}

func (e *env) get(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c, err := e.resource(u)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, u.GetName(), metav1.GetOptions{})
}

// shared returns to's manifests that from also lists, and their keys.
func (e *env) shared(from, to string) (objs []*unstructured.Unstructured, keys []string) {
	old := map[string]bool{}
	for _, r := range e.manifests[from] {
		for _, m := range r {
			old[keyOf(m)] = true
		}
	}
	for _, r := range e.manifests[to] {
		for _, m := range r {
			if old[keyOf(m)] {
				objs = append(objs, m)
				keys = append(keys, keyOf(m))
			}
		}
	}
	return objs, keys
}

// configMap returns a ConfigMap stub of the env's namespace.
func (e *env) configMap(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace(e.ns)
	u.SetName(name)
	return u
}

// checkEnd checks I3 after an upgrade from one generation to another: every
// shared resource exists, the resource only from listed is gone, the one
// only to lists exists, and exactly to's two sets remain.
func (e *env) checkEnd(ctx context.Context, from, to string) {
	e.t.Helper()
	shared, _ := e.shared(from, to)
	for _, m := range shared {
		if _, err := e.get(ctx, m); err != nil {
			e.t.Errorf("shared %s: %v", keyOf(m), err)
		}
	}
	if _, err := e.get(ctx, e.configMap(onlyIn(from))); !apierrors.IsNotFound(err) {
		e.t.Errorf("ConfigMap %s only %s listed: want NotFound, got %v", onlyIn(from), from, err)
	}
	if _, err := e.get(ctx, e.configMap(onlyIn(to))); err != nil {
		e.t.Errorf("ConfigMap %s only %s lists: %v", onlyIn(to), to, err)
	}
	e.checkSets(ctx, to)
}

// checkSets checks that the family holds exactly one live set per role of
// generation gen and nothing else.
func (e *env) checkSets(ctx context.Context, gen string) {
	e.t.Helper()
	sets, err := e.sets(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	roles := map[string]int{}
	for _, s := range sets {
		if s.Generation != gen || s.Deleting {
			e.t.Errorf("set %s of generation %s (deleting %v) remains; want only %s", s.Name, s.Generation, s.Deleting, gen)
		}
		roles[s.Role]++
	}
	if roles["static"] != 1 || roles["deployment"] != 1 || len(sets) != 2 {
		e.t.Errorf("sets per role %v, want one static and one deployment set", roles)
	}
}

// webhookBody is a validating webhook configuration that matches no request
// (a group nobody serves) and fails open, so installing it changes nothing.
func webhookBody(gen string) map[string]any {
	return map[string]any{
		"webhooks": []any{map[string]any{
			"name": "validate." + gen + ".e2e.example.com", "sideEffects": "None", "failurePolicy": "Ignore",
			"admissionReviewVersions": []any{"v1"},
			"clientConfig":            map[string]any{"url": "https://127.0.0.1:1/x"},
			"rules": []any{map[string]any{"apiGroups": []any{"nonexistent.e2e.example.com"}, "apiVersions": []any{"v1"},
				"resources": []any{"things"}, "operations": []any{"CREATE"}}},
		}}}
}
