package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// demoLabel marks everything the demo installs on a real cluster; the
// demo refuses to touch an object of its component that lacks it.
const demoLabel = "handoff.kube-handoff.io/demo"

// Timing of the run against a real cluster.
const (
	liveInterval = 100 * time.Millisecond // between reconciles
	liveTimeout  = 3 * time.Minute        // per convergence
)

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// runCluster runs the demo's upgrade against the cluster of a kubeconfig:
// the library's executor and handofftest's set controller, unchanged but
// for their clients, reconcile in turn against the real API server (and
// its garbage collector) until the upgrade settles. Absences of shared
// resources are recorded with watches opened before the upgrade starts.
// At the end the component is removed again.
func runCluster(ctx context.Context, out io.Writer, kubeconfig string) (summary, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return summary{}, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.WarningHandler = rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return summary{}, err
	}
	fmt.Fprintf(out, "# cluster %s\n", cfg.Host)

	w := handofftest.NewWorld("TektonPipeline")
	roles := []string{"static", "deployment"}
	v1 := w.Desire("v0.79.0", roles, forAPIServer(handofftest.Pipelines(namespace, "v0.79.0")))
	v2 := w.Desire("v0.80.0", roles, forAPIServer(handofftest.Pipelines(namespace, "v0.80.0")))
	if err := ensureSetCRD(ctx, dyn, out); err != nil {
		return summary{}, err
	}
	mapper, err := discover(ctx, cfg, w.Manifests)
	if err != nil {
		return summary{}, err
	}
	// The same executor, finalizer and set controller as on the fake
	// cluster, pointed at the real one.
	w.Executor.Dynamic, w.Executor.Mapper = dyn, mapper
	w.Controller.Client, w.Controller.Mapper = dyn, mapper
	w.Controller.Executor.Dynamic, w.Controller.Executor.Mapper = dyn, mapper
	run := &liveRun{w: w, dyn: dyn, mapper: mapper, out: out}
	if err := run.preflight(ctx); err != nil {
		return summary{}, err
	}
	if sets, err := run.sets(ctx); err != nil {
		return summary{}, err
	} else if len(sets) > 0 {
		fmt.Fprintln(out, "# remove what an earlier run left")
		if _, err := run.converge(ctx, nil); err != nil {
			return summary{}, err
		}
	}

	fmt.Fprintln(out, "# install v0.79.0")
	if _, err := run.converge(ctx, v1); err != nil {
		return summary{}, err
	}
	s, oldKeys, newKeys, shared := newSummary("handoff", w)
	s.clock = "wall time"
	rec, err := record(ctx, dyn, mapper, shared)
	if err != nil {
		return s, err
	}
	fmt.Fprintln(out, "\n# upgrade to v0.80.0")
	s.rounds, err = run.converge(ctx, v2)
	gaps, rerr := rec.stop(ctx)
	if err = errors.Join(err, rerr); err != nil {
		return s, err
	}
	sets, err := run.sets(ctx)
	if err != nil {
		return s, err
	}
	if err := checkConverged(sets, v2); err != nil {
		return s, err
	}
	s.gaps = gaps
	absent := map[handofftest.Key]bool{}
	for _, g := range s.gaps {
		absent[g.Key] = true
		s.longest = max(s.longest, g.To.Sub(g.From).Round(time.Millisecond))
	}
	s.keptShared = len(shared) - len(absent)
	for k := range oldKeys {
		if newKeys[k] {
			continue
		}
		if ok, err := run.exists(ctx, k); err != nil {
			return s, err
		} else if !ok {
			s.pruned++
		}
	}
	for k := range newKeys {
		if oldKeys[k] {
			continue
		}
		if ok, err := run.exists(ctx, k); err != nil {
			return s, err
		} else if ok {
			s.exists++
		}
	}

	fmt.Fprintf(out, "\n# remove the demo component (its Namespace and CRDs are protected and stay)\n")
	if _, err := run.converge(ctx, nil); err != nil {
		return s, fmt.Errorf("remove the demo component: %w", err)
	}
	return s, nil
}

// forAPIServer completes the fake cluster's manifests so that a real API
// server accepts them, keeping every identity: CRDs get names, scope and a
// version; Deployments a selector (and no replicas: the demo does not run
// the images); bindings an apiGroup in their roleRef; webhooks their
// review versions and failurePolicy Ignore (no webhook server runs); the
// APIService its priorities. Every object gets demoLabel.
func forAPIServer(in map[string][]*unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	out := map[string][]*unstructured.Unstructured{}
	for role, list := range in {
		for _, m := range list {
			u := m.DeepCopy()
			name := u.GetName()
			switch u.GetKind() {
			case "CustomResourceDefinition":
				plural, group, _ := strings.Cut(name, ".")
				singular := strings.TrimSuffix(plural, "s")
				kind := strings.ToUpper(singular[:1]) + singular[1:]
				u.Object["spec"] = map[string]any{
					"group": group, "scope": "Namespaced",
					"names": map[string]any{"plural": plural, "singular": singular, "kind": kind, "listKind": kind + "List"},
					"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
						"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
				}
			case "Deployment":
				sel := map[string]any{"app": name}
				_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "replicas")
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"matchLabels": sel}, "spec", "selector")
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"labels": sel}, "spec", "template", "metadata")
			case "ClusterRoleBinding", "RoleBinding":
				_ = unstructured.SetNestedField(u.Object, "rbac.authorization.k8s.io", "roleRef", "apiGroup")
			case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
				hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
				for _, h := range hooks {
					h.(map[string]any)["admissionReviewVersions"] = []any{"v1"}
					h.(map[string]any)["failurePolicy"] = "Ignore"
				}
				_ = unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
			case "APIService":
				version, group, _ := strings.Cut(name, ".")
				_ = unstructured.SetNestedField(u.Object, group, "spec", "group")
				_ = unstructured.SetNestedField(u.Object, version, "spec", "version")
				_ = unstructured.SetNestedField(u.Object, int64(100), "spec", "groupPriorityMinimum")
				_ = unstructured.SetNestedField(u.Object, int64(100), "spec", "versionPriority")
			case "HorizontalPodAutoscaler":
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}, "spec", "scaleTargetRef")
			}
			lbls := u.GetLabels()
			if lbls == nil {
				lbls = map[string]string{}
			}
			lbls[demoLabel] = "upgrade"
			u.SetLabels(lbls)
			out[role] = append(out[role], u)
		}
	}
	return out
}

// setCRD is the demo's set kind, shaped like tektoncd/operator's
// TektonInstallerSet CRD: cluster-scoped, with a status subresource.
func setCRD() *unstructured.Unstructured {
	obj := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"spec": map[string]any{
			"group": handofftest.SetResource.Group,
			"scope": "Cluster",
			"names": map[string]any{"plural": "tektoninstallersets", "singular": "tektoninstallerset",
				"kind": "TektonInstallerSet", "listKind": "TektonInstallerSetList"},
			"versions": []any{map[string]any{
				"name": handofftest.SetResource.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"properties": map[string]any{"spec": obj, "status": obj}}},
			}},
		},
	}}
	u.SetName(handofftest.SetResource.Resource + "." + handofftest.SetResource.Group)
	u.SetLabels(map[string]string{demoLabel: "upgrade"})
	return u
}

// ensureSetCRD installs the set CRD if it is absent and waits until sets
// can be listed. A set CRD the demo did not install means the cluster runs
// tektoncd/operator, whose controller would act on the demo's sets: the
// demo refuses.
func ensureSetCRD(ctx context.Context, dyn dynamic.Interface, out io.Writer) error {
	want := setCRD()
	live, err := dyn.Resource(crds).Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(out, "# install CRD %s\n", want.GetName())
		if _, err := dyn.Resource(crds).Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("CRD %s: create: %w", want.GetName(), err)
		}
	case err != nil:
		return fmt.Errorf("CRD %s: %w", want.GetName(), err)
	case live.GetLabels()[demoLabel] == "":
		return fmt.Errorf("CRD %s exists and was not installed by this demo: refusing to run beside a real tektoncd/operator; use a disposable cluster", want.GetName())
	}
	return poll(ctx, 30*time.Second, func() error {
		_, err := dyn.Resource(handofftest.SetResource).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("CRD %s not served yet: %w", want.GetName(), err)
		}
		return nil
	})
}

// poll calls fn every liveInterval until it succeeds or within has passed.
func poll(ctx context.Context, within time.Duration, fn func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(liveInterval):
		}
	}
}

// discover builds a REST mapper for the kinds the manifests use, from the
// API server's discovery documents of just their group versions (a broken
// aggregated API elsewhere does not matter).
func discover(ctx context.Context, cfg *rest.Config, manifests map[string]map[string][]*unstructured.Unstructured) (meta.RESTMapper, error) {
	want := map[schema.GroupVersion]map[string]bool{}
	for _, roles := range manifests {
		for _, list := range roles {
			for _, m := range list {
				gvk := m.GroupVersionKind()
				if want[gvk.GroupVersion()] == nil {
					want[gvk.GroupVersion()] = map[string]bool{}
				}
				want[gvk.GroupVersion()][gvk.Kind] = true
			}
		}
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	var gvs []schema.GroupVersion
	for gv := range want {
		gvs = append(gvs, gv)
	}
	slices.SortFunc(gvs, func(a, b schema.GroupVersion) int { return strings.Compare(a.String(), b.String()) })
	mapper := meta.NewDefaultRESTMapper(gvs)
	for _, gv := range gvs {
		path := "/apis/" + gv.String()
		if gv.Group == "" {
			path = "/api/" + gv.Version
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("discover %s: %w", gv, err)
		}
		var list metav1.APIResourceList
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("discover %s: %s", gv, resp.Status)
		}
		if err != nil {
			return nil, fmt.Errorf("discover %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !want[gv][r.Kind] {
				continue
			}
			scope := meta.RESTScopeRoot
			if r.Namespaced {
				scope = meta.RESTScopeNamespace
			}
			mapper.AddSpecific(gv.WithKind(r.Kind), gv.WithResource(r.Name), gv.WithResource(r.SingularName), scope)
			delete(want[gv], r.Kind)
		}
		for kind := range want[gv] {
			return nil, fmt.Errorf("discover %s: the API server does not serve kind %s", gv, kind)
		}
	}
	return mapper, nil
}

// liveRun is the demo's World on a real cluster.
type liveRun struct {
	w      *handofftest.World
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	out    io.Writer
}

func (r *liveRun) resource(k handofftest.Key) (dynamic.ResourceInterface, error) {
	m, err := r.mapper.RESTMapping(schema.GroupKind{Group: k.Group, Kind: k.Kind})
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.dyn.Resource(m.Resource).Namespace(k.Namespace), nil
	}
	return r.dyn.Resource(m.Resource), nil
}

func (r *liveRun) get(ctx context.Context, k handofftest.Key) (*unstructured.Unstructured, error) {
	ri, err := r.resource(k)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, k.Name, metav1.GetOptions{})
}

func (r *liveRun) exists(ctx context.Context, k handofftest.Key) (bool, error) {
	_, err := r.get(ctx, k)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// preflight refuses to run when one of the component's objects exists
// without demoLabel: the demo would overwrite or delete something it did
// not install.
func (r *liveRun) preflight(ctx context.Context) error {
	var errs []error
	for _, roles := range r.w.Manifests {
		for _, list := range roles {
			for _, m := range list {
				k := handofftest.KeyOf(m)
				live, err := r.get(ctx, k)
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					errs = append(errs, fmt.Errorf("%s: %w", k, err))
				case live.GetLabels()[demoLabel] == "":
					errs = append(errs, fmt.Errorf("%s exists and was not installed by this demo: refusing to touch it; use a disposable cluster", k))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// sets lists the family's sets.
func (r *liveRun) sets(ctx context.Context) ([]handoff.Set, error) {
	fam := r.w.Family
	list, err := r.dyn.Resource(fam.Resource).List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
	if err != nil {
		return nil, err
	}
	return fam.ObserveAll(list.Items)
}

// converge runs rounds (the executor's Step, then one pass of the set
// controller) until the plan is settled and no set outside desired is left,
// not even one the garbage collector is still deleting. It prints each plan
// that differs from the one before, and checks I5 after every round.
// Failed rounds are retried until liveTimeout.
func (r *liveRun) converge(ctx context.Context, desired *handoff.Desired) (rounds int, err error) {
	var gate handofftest.Gate
	var last error
	printed := ""
	deadline := time.Now().Add(liveTimeout)
	for rounds = 1; ; rounds++ {
		res, err := r.w.Executor.Step(ctx, desired)
		if p := res.Plan.String(); res.Plan.Phase != "" && p != printed {
			fmt.Fprint(r.out, p)
			printed = p
		}
		err = errors.Join(err, r.w.Controller.Reconcile(ctx))
		sets, lerr := r.sets(ctx)
		if lerr == nil && desired != nil {
			if gerr := gate.Check(sets, *desired); gerr != nil {
				return rounds, gerr
			}
		}
		if err = errors.Join(err, lerr); err != nil {
			last = err
		} else if !res.Requeue && onlyDesired(sets, desired) {
			return rounds, nil
		}
		if time.Now().After(deadline) {
			return rounds, fmt.Errorf("not converged within %s: %w", liveTimeout, last)
		}
		select {
		case <-ctx.Done():
			return rounds, ctx.Err()
		case <-time.After(liveInterval):
		}
	}
}

// onlyDesired reports whether sets hold only live sets of desired.
func onlyDesired(sets []handoff.Set, desired *handoff.Desired) bool {
	for _, s := range sets {
		if desired == nil || s.Deleting || s.Generation != desired.Generation {
			return false
		}
	}
	return true
}

// checkConverged is handofftest.CheckConverged (I2, I3) over a live list.
func checkConverged(sets []handoff.Set, desired *handoff.Desired) error {
	var errs []error
	count := map[string]int{}
	for _, s := range sets {
		switch {
		case s.Generation != desired.Generation:
			errs = append(errs, fmt.Errorf("I3: %s of an old generation remains", s))
		case s.Deleting:
			errs = append(errs, fmt.Errorf("I3: %s is still being deleted", s))
		case s.Readiness.State != handoff.Ready:
			errs = append(errs, fmt.Errorf("I3: %s is %s", s, s.Readiness))
		}
		count[s.Role]++
	}
	for _, r := range desired.Roles {
		if count[r.Name] != 1 {
			errs = append(errs, fmt.Errorf("I2: %d sets of %s/%s, want 1", count[r.Name], desired.Generation, r.Name))
		}
	}
	return errors.Join(errs...)
}

// recorder records, from watches, every absence of the shared resources.
type recorder struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	keys   []handofftest.Key
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	absent map[handofftest.Key]time.Time
	gaps   []handofftest.Gap
	errs   []error
}

// record checks that every key exists and opens one watch per resource
// and namespace, from the resourceVersion of that check's list, so that no
// deletion between the check and the end of the upgrade goes unseen.
func record(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, keys []handofftest.Key) (*recorder, error) {
	wctx, cancel := context.WithCancel(ctx)
	rec := &recorder{dyn: dyn, mapper: mapper, keys: keys, cancel: cancel, absent: map[handofftest.Key]time.Time{}}
	type scope struct {
		gvr schema.GroupVersionResource
		ns  string
	}
	groups := map[scope]map[handofftest.Key]bool{}
	for _, k := range keys {
		m, err := mapper.RESTMapping(schema.GroupKind{Group: k.Group, Kind: k.Kind})
		if err != nil {
			cancel()
			return nil, err
		}
		sc := scope{gvr: m.Resource, ns: k.Namespace}
		if groups[sc] == nil {
			groups[sc] = map[handofftest.Key]bool{}
		}
		groups[sc][k] = true
	}
	for sc, want := range groups {
		var ri dynamic.ResourceInterface = dyn.Resource(sc.gvr)
		if sc.ns != "" {
			ri = dyn.Resource(sc.gvr).Namespace(sc.ns)
		}
		list, err := ri.List(wctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("list %s: %w", sc.gvr.Resource, err)
		}
		seen := map[handofftest.Key]bool{}
		for i := range list.Items {
			seen[handofftest.KeyOf(&list.Items[i])] = true
		}
		for k := range want {
			if !seen[k] {
				cancel()
				return nil, fmt.Errorf("%s is absent before the upgrade", k)
			}
		}
		wi, err := ri.Watch(wctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("watch %s: %w", sc.gvr.Resource, err)
		}
		rec.wg.Add(1)
		go rec.consume(wctx, sc.gvr.Resource, wi, want)
	}
	return rec, nil
}

func (r *recorder) consume(ctx context.Context, what string, wi watch.Interface, want map[handofftest.Key]bool) {
	defer r.wg.Done()
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("watch of %s ended before the upgrade did: the record is incomplete", what))
				}
				return
			}
			r.event(what, ev, want)
		}
	}
}

func (r *recorder) event(what string, ev watch.Event, want map[handofftest.Key]bool) {
	if ev.Type == watch.Error {
		r.fail(fmt.Errorf("watch of %s: %w", what, apierrors.FromObject(ev.Object)))
		return
	}
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return
	}
	k := handofftest.KeyOf(u)
	if !want[k] {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	from, gone := r.absent[k]
	switch {
	case ev.Type == watch.Deleted && !gone:
		r.absent[k] = now
	case ev.Type != watch.Deleted && gone:
		r.gaps = append(r.gaps, handofftest.Gap{Key: k, From: from, To: now})
		delete(r.absent, k)
	}
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// stop ends the watches and returns the absences: closed ones, ones still
// open, and any key found missing by a final Get that no watch reported.
func (r *recorder) stop(ctx context.Context) ([]handofftest.Gap, error) {
	r.cancel()
	r.wg.Wait()
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, from := range r.absent {
		r.gaps = append(r.gaps, handofftest.Gap{Key: k, From: from, To: now})
	}
	for _, k := range r.keys {
		if _, open := r.absent[k]; open {
			continue
		}
		m, err := r.mapper.RESTMapping(schema.GroupKind{Group: k.Group, Kind: k.Kind})
		if err != nil {
			r.errs = append(r.errs, err)
			continue
		}
		var ri dynamic.ResourceInterface = r.dyn.Resource(m.Resource)
		if k.Namespace != "" {
			ri = r.dyn.Resource(m.Resource).Namespace(k.Namespace)
		}
		if _, err := ri.Get(ctx, k.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			r.gaps = append(r.gaps, handofftest.Gap{Key: k, From: now, To: now})
		} else if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	slices.SortFunc(r.gaps, func(a, b handofftest.Gap) int { return a.From.Compare(b.From) })
	return r.gaps, errors.Join(r.errs...)
}

// restConfig reads a kubeconfig file's current context into a rest.Config.
// It reads the file itself, with client-go's kubeconfig types, because
// k8s.io/client-go/tools/clientcmd is not in the module's dependencies; it
// supports certificates, tokens, basic auth and exec plugins, not the
// legacy auth-provider plugins, nor merging several files.
func restConfig(path string) (*rest.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	fail := func(format string, a ...any) (*rest.Config, error) {
		return nil, fmt.Errorf("kubeconfig %s: "+format, append([]any{path}, a...)...)
	}
	var kctx *clientcmdv1.Context
	for i := range kc.Contexts {
		if kc.Contexts[i].Name == kc.CurrentContext {
			kctx = &kc.Contexts[i].Context
		}
	}
	if kctx == nil {
		return fail("no current context %q", kc.CurrentContext)
	}
	var cluster *clientcmdv1.Cluster
	for i := range kc.Clusters {
		if kc.Clusters[i].Name == kctx.Cluster {
			cluster = &kc.Clusters[i].Cluster
		}
	}
	if cluster == nil {
		return fail("no cluster %q", kctx.Cluster)
	}
	var user clientcmdv1.AuthInfo
	for i := range kc.AuthInfos {
		if kc.AuthInfos[i].Name == kctx.AuthInfo {
			user = kc.AuthInfos[i].AuthInfo
		}
	}
	if user.AuthProvider != nil {
		return fail("auth-provider %q is not supported; use an exec plugin", user.AuthProvider.Name)
	}
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(filepath.Dir(path), p)
	}
	cfg := &rest.Config{
		Host: cluster.Server,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   cluster.InsecureSkipTLSVerify,
			ServerName: cluster.TLSServerName,
			CAFile:     rel(cluster.CertificateAuthority),
			CAData:     cluster.CertificateAuthorityData,
			CertFile:   rel(user.ClientCertificate),
			CertData:   user.ClientCertificateData,
			KeyFile:    rel(user.ClientKey),
			KeyData:    user.ClientKeyData,
		},
		BearerToken:     user.Token,
		BearerTokenFile: rel(user.TokenFile),
		Username:        user.Username,
		Password:        user.Password,
	}
	if e := user.Exec; e != nil {
		cfg.ExecProvider = &clientcmdapi.ExecConfig{
			Command: e.Command, Args: e.Args, APIVersion: e.APIVersion, InstallHint: e.InstallHint,
			ProvideClusterInfo: e.ProvideClusterInfo, InteractiveMode: clientcmdapi.ExecInteractiveMode(e.InteractiveMode),
		}
		if cfg.ExecProvider.InteractiveMode == "" {
			cfg.ExecProvider.InteractiveMode = clientcmdapi.IfAvailableExecInteractiveMode
		}
		for _, v := range e.Env {
			cfg.ExecProvider.Env = append(cfg.ExecProvider.Env, clientcmdapi.ExecEnvVar{Name: v.Name, Value: v.Value})
		}
	}
	return cfg, nil
}
