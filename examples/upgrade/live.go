package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/handofftest/tektonfixture"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
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

// runCluster runs the demo's upgrade against the cluster t selects: the
// library's executor and handofftest's set controller, unchanged but for
// their clients, reconcile in turn against the real API server (and its
// garbage collector) until the upgrade settles. Absences of shared
// resources are recorded with watches opened before the upgrade starts.
// At the end the component is removed again.
func runCluster(ctx context.Context, out io.Writer, t target) (summary, error) {
	c, err := connect(t)
	if err != nil {
		return summary{}, err
	}
	dyn, mapper := c.dynamic, c.mapper
	fmt.Fprintf(out, "# cluster %s (%s)\n", c.config.Host, c.source)

	w := handofftest.NewWorld("TektonPipeline")
	roles := []string{"static", "deployment"}
	v1 := w.Desire("v0.79.0", roles, forAPIServer(tektonfixture.Pipelines(namespace, "v0.79.0")))
	v2 := w.Desire("v0.80.0", roles, forAPIServer(tektonfixture.Pipelines(namespace, "v0.80.0")))
	if err := ensureSetCRD(ctx, dyn, out); err != nil {
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
	if err := handofftest.CheckSets(sets, v2); err != nil {
		return s, err
	}
	s.gaps = gaps
	absent := map[handofftest.Key]bool{}
	for _, g := range s.gaps {
		absent[g.Key] = true
		s.longest = max(s.longest, g.To.Sub(g.From).Round(time.Millisecond))
	}
	s.keptShared = len(shared) - len(absent)
	// What only the retired sets owned is the garbage collector's to
	// delete once they are gone (Finalize writes nothing for it). Its REST
	// mapper learns a set kind whose CRD was installed a moment ago only at
	// a later discovery resync, and backs off meanwhile, so on a fresh
	// cluster that can take minutes: an obsolete object counts as pruned
	// when it is gone, or when every owner it names is gone and nothing
	// else keeps it, waiting a little for the collector first.
	live, err := run.sets(ctx)
	if err != nil {
		return s, err
	}
	setUIDs := map[string]bool{}
	for _, set := range live {
		setUIDs[string(set.UID)] = true
	}
	var obsolete []handofftest.Key
	for k := range oldKeys {
		if !newKeys[k] {
			obsolete = append(obsolete, k)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		s.pruned = 0
		for _, k := range obsolete {
			obj, err := run.get(ctx, k)
			switch {
			case apierrors.IsNotFound(err):
				s.pruned++
				continue
			case err != nil:
				return false, err
			}
			owners := obj.GetOwnerReferences()
			orphaned := len(owners) > 0
			for _, o := range owners {
				orphaned = orphaned && o.Kind == run.w.Family.Kind && !setUIDs[string(o.UID)]
			}
			if orphaned {
				s.pruned++
			}
		}
		return s.pruned == len(obsolete), nil
	})
	if err != nil && !wait.Interrupted(err) {
		return s, err
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

// liveRun is the demo's World on a real cluster.
type liveRun struct {
	w      *handofftest.World
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	out    io.Writer
}

func (r *liveRun) get(ctx context.Context, k handofftest.Key) (*unstructured.Unstructured, error) {
	ri, err := resource(r.dyn, r.mapper, k)
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
// that differs from the one before, and checks I5 from the first round on.
// Failed rounds are retried until liveTimeout.
func (r *liveRun) converge(ctx context.Context, desired *handoff.Desired) (rounds int, err error) {
	var gate handofftest.Gate
	if desired != nil {
		// The state before the first round, so that the first round is
		// checked too.
		sets, err := r.sets(ctx)
		if err != nil {
			return 0, err
		}
		if err := gate.Check(sets, *desired); err != nil {
			return 0, err
		}
	}
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
