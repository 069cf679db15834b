//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/internal/controlplane"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

var kinds = []kindInfo{
	{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", true},
	{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, "serviceaccounts", true},
	{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, "services", true},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", true},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", false},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, "clusterrolebindings", false},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}, "validatingwebhookconfigurations", false},
	{schema.GroupVersionKind{Group: "operator.tekton.dev", Version: "v1alpha1", Kind: "TektonInstallerSet"}, "tektoninstallersets", false},
}

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

// component returns the manifests of a small component by role; suffix
// keeps cluster-scoped names apart between scenarios.
func component(ns, suffix, gen string) map[string][]*unstructured.Unstructured {
	obj := func(apiVersion, kind, namespace, name string, body map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
		for k, v := range body {
			u.Object[k] = v
		}
		u.SetName(name)
		if namespace != "" {
			u.SetNamespace(namespace)
		}
		u.SetLabels(map[string]string{"app.kubernetes.io/part-of": "e2e", "app.kubernetes.io/version": gen})
		return u
	}
	var static, deploy []*unstructured.Unstructured
	for i := range 16 {
		static = append(static, obj("v1", "ConfigMap", ns, fmt.Sprintf("config-%02d", i), map[string]any{"data": map[string]any{"version": gen}}))
	}
	static = append(static, obj("v1", "ConfigMap", ns, "config-only-"+gen, map[string]any{"data": map[string]any{"version": gen}}))
	static = append(static, obj("v1", "ServiceAccount", ns, "e2e-controller", nil))
	role := "e2e-role-" + suffix
	static = append(static, obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", role, map[string]any{"rules": []any{
		map[string]any{"apiGroups": []any{"e2e.example.com"}, "resources": []any{"things-" + gen}, "verbs": []any{"get"}}}}))
	static = append(static, obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", role, map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "e2e-controller", "namespace": ns}}}))
	static = append(static, obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "e2e-webhook-"+suffix, map[string]any{
		"webhooks": []any{map[string]any{
			"name": "validate." + gen + ".e2e.example.com", "sideEffects": "None", "failurePolicy": "Ignore",
			"admissionReviewVersions": []any{"v1"},
			"clientConfig":            map[string]any{"url": "https://127.0.0.1:1/x"},
			"rules": []any{map[string]any{"apiGroups": []any{"nonexistent.e2e.example.com"}, "apiVersions": []any{"v1"},
				"resources": []any{"things"}, "operations": []any{"CREATE"}}},
		}}}))
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

func keyOf(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

type event struct {
	typ watch.EventType
	at  time.Time
}

// monitor records watch events per object key.
type monitor struct {
	mu     sync.Mutex
	events map[string][]event
}

func startMonitor(t *testing.T, ctx context.Context, dyn dynamic.Interface) *monitor {
	m := &monitor{events: map[string][]event{}}
	var ready sync.WaitGroup
	for _, k := range kinds[:len(kinds)-1] {
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
						continue
					}
					rv = u.GetResourceVersion()
					if ev.Type == watch.Bookmark {
						continue
					}
					u.SetKind(k.gvk.Kind)
					m.mu.Lock()
					m.events[keyOf(u)] = append(m.events[keyOf(u)], event{ev.Type, time.Now()})
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

type env struct {
	t          *testing.T
	dyn        dynamic.Interface
	mapper     meta.RESTMapper
	ns, suffix string
	fam        handoff.Family
	exec       *handoff.Executor
	ctrl       *handofftest.SetController
	manifests  map[string]map[string][]*unstructured.Unstructured
	calls      int
}

func newEnv(t *testing.T, name string, prop metav1.DeletionPropagation) *env {
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dyn: dyn, mapper: newMapper(), ns: "e2e-" + name, suffix: name,
		manifests: map[string]map[string][]*unstructured.Unstructured{}}
	e.fam = handoff.Family{
		Resource:        handofftest.SetResource,
		Kind:            "TektonInstallerSet",
		Selector:        map[string]string{"operator.tekton.dev/created-by": "e2e-" + name, "operator.tekton.dev/type": "main"},
		GenerationLabel: "operator.tekton.dev/release-version",
		HashAnnotation:  "operator.tekton.dev/last-applied-hash",
		NamePrefix:      "e2e-" + name + "-main-",
	}
	prune := handoff.DefaultPruneOptions()
	e.exec = &handoff.Executor{Family: e.fam, Dynamic: dyn, Mapper: e.mapper, Prune: prune,
		RoleOrder: []string{"static", "deployment"}, Propagation: prop, Build: e.build}
	fin := *e.exec
	e.ctrl = &handofftest.SetController{Executor: &fin, Client: dyn, Mapper: e.mapper,
		Finalizer: "tektoninstallersets.operator.tekton.dev", ReadyAfter: 1, Unowned: prune.Unowned}
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": e.ns}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(context.Background(), nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return e
}

func (e *env) build(_ context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
	ms, ok := e.manifests[d.Generation][r.Name]
	if !ok {
		return nil, fmt.Errorf("no manifests for %s/%s", d.Generation, r.Name)
	}
	items := make([]any, 0, len(ms))
	for _, m := range ms {
		items = append(items, m.DeepCopy().Object)
	}
	return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"manifests": items}}}, nil
}

func (e *env) desire(gen string) *handoff.Desired {
	ms := component(e.ns, e.suffix, gen)
	e.manifests[gen] = ms
	d := &handoff.Desired{Generation: gen}
	for i, r := range []string{"static", "deployment"} {
		role := handoff.Role{Name: r}
		if i > 0 {
			role.After = []string{"static"}
		}
		for _, m := range ms[r] {
			role.Resources = append(role.Resources, handoff.RefOf(m))
		}
		d.Roles = append(d.Roles, role)
	}
	return d
}

func (e *env) sets(ctx context.Context) ([]handoff.Set, error) {
	list, err := e.dyn.Resource(e.fam.Resource).List(ctx, metav1.ListOptions{LabelSelector: e.fam.LabelSelector().String()})
	if err != nil {
		return nil, err
	}
	return e.fam.ObserveAll(list.Items)
}

// converge loops Step + Reconcile until settled and no set is deleting.
func (e *env) converge(ctx context.Context, d *handoff.Desired) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for rounds := 1; ; rounds++ {
		if time.Now().After(deadline) {
			e.t.Fatalf("not converged after 60s (%d rounds)", rounds)
		}
		res, err := e.exec.Step(ctx, d)
		e.calls += len(res.Writes)
		if err != nil {
			e.t.Logf("round %d: step: %v (retrying)", rounds, err)
		}
		if cerr := e.ctrl.Reconcile(ctx); cerr != nil {
			e.t.Logf("round %d: reconcile: %v (retrying)", rounds, cerr)
			err = cerr
		}
		if err == nil && !res.Requeue {
			sets, lerr := e.sets(ctx)
			if lerr == nil {
				deleting := false
				for _, s := range sets {
					deleting = deleting || s.Deleting
				}
				if !deleting {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) get(ctx context.Context, u *unstructured.Unstructured) error {
	m, err := e.mapper.RESTMapping(u.GroupVersionKind().GroupKind())
	if err != nil {
		return err
	}
	var c dynamic.ResourceInterface = e.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		c = e.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	_, err = c.Get(ctx, u.GetName(), metav1.GetOptions{})
	return err
}

// shared returns the v2 manifests that v1 also lists.
func (e *env) shared() (objs []*unstructured.Unstructured, keys []string) {
	v1 := map[string]bool{}
	for _, r := range e.manifests["v1"] {
		for _, m := range r {
			v1[keyOf(m)] = true
		}
	}
	for _, r := range e.manifests["v2"] {
		for _, m := range r {
			if v1[keyOf(m)] {
				objs = append(objs, m)
				keys = append(keys, keyOf(m))
			}
		}
	}
	return objs, keys
}

func (e *env) checkEnd(ctx context.Context) {
	e.t.Helper()
	shared, _ := e.shared()
	for _, m := range shared {
		if err := e.get(ctx, m); err != nil {
			e.t.Errorf("shared %s: %v", keyOf(m), err)
		}
	}
	if err := e.get(ctx, e.manifests["v1"]["static"][16]); !apierrors.IsNotFound(err) {
		e.t.Errorf("v1-only ConfigMap: want NotFound, got %v", err)
	}
	if err := e.get(ctx, e.manifests["v2"]["static"][16]); err != nil {
		e.t.Errorf("v2-only ConfigMap: %v", err)
	}
	sets, err := e.sets(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range sets {
		if s.Generation != "v2" {
			e.t.Errorf("set %s of generation %s remains", s.Name, s.Generation)
		}
	}
	if len(sets) != 2 {
		e.t.Errorf("want 2 sets, got %d", len(sets))
	}
}

type row struct {
	scenario string
	deleted  int
	longest  time.Duration
	calls    int
	took     time.Duration
}

var (
	summaryMu sync.Mutex
	summary   []row
)

func record(r row) {
	summaryMu.Lock()
	defer summaryMu.Unlock()
	summary = append(summary, r)
}

func TestUpgrade(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "e2e"}}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	mon := startMonitor(t, ctx, dyn)

	for _, tc := range []struct {
		name string
		prop metav1.DeletionPropagation
	}{{"foreground", metav1.DeletePropagationForeground}, {"background", metav1.DeletePropagationBackground}} {
		t.Run("handoff-"+tc.name, func(t *testing.T) {
			e := newEnv(t, tc.name, tc.prop)
			e.converge(ctx, e.desire("v1"))
			calls := e.calls
			v2 := e.desire("v2")
			began := time.Now()
			e.converge(ctx, v2)
			took := time.Since(began)
			time.Sleep(2 * time.Second) // give the garbage collector time
			e.checkEnd(ctx)
			_, keys := e.shared()
			deleted, longest := mon.stats(keys, began)
			if len(deleted) != 0 {
				t.Errorf("shared resources deleted during the upgrade: %v", deleted)
			}
			record(row{"handoff/" + tc.name, len(deleted), longest, e.calls - calls, took})
		})
	}

	t.Run("legacy", func(t *testing.T) {
		e := newEnv(t, "legacy", "")
		e.converge(ctx, e.desire("v1"))
		calls := e.calls
		v2 := e.desire("v2")
		began := time.Now()
		e.ctrl.Legacy = true
		sets, err := e.sets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fg := metav1.DeletePropagationForeground
		for _, s := range sets {
			if err := e.dyn.Resource(e.fam.Resource).Delete(ctx, s.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			e.calls++
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatal("v1 sets not gone after 60s")
			}
			if err := e.ctrl.Reconcile(ctx); err != nil {
				t.Logf("reconcile: %v (retrying)", err)
			}
			left, err := e.sets(ctx)
			if err == nil && len(left) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		e.converge(ctx, v2)
		e.ctrl.Legacy = false
		took := time.Since(began)
		time.Sleep(2 * time.Second)
		e.checkEnd(ctx)
		_, keys := e.shared()
		deleted, longest := mon.stats(keys, began)
		if len(deleted) == 0 {
			t.Errorf("legacy upgrade deleted no shared resource; the monitor should have seen deletions")
		}
		t.Logf("legacy: %d of %d shared resources deleted, longest absence %d ms", len(deleted), len(keys), longest.Milliseconds())
		record(row{"legacy", len(deleted), longest, e.calls - calls, took})
	})

	t.Logf("%-22s %8s %12s %10s %10s", "scenario", "deleted", "absence ms", "exec calls", "upgrade")
	for _, r := range summary {
		t.Logf("%-22s %8d %12d %10d %10v", r.scenario, r.deleted, r.longest.Milliseconds(), r.calls, r.took.Round(time.Millisecond))
	}
}
