package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// bundleController is the guestbook operator's Bundle controller: the
// other half of what a generic operator writes. It keeps the library's
// set-controller contract:
//
//   - every Bundle gets [finalizer]; when a Bundle is deleted, the
//     finalizer runs [handoff.Executor.Finalize], which keeps (and hands
//     over) what a successor lists and deletes only the rest, and only then
//     is the finalizer removed;
//   - before writing a listed resource it asks [handoff.Guard.MayApply]
//     and leaves the resource alone when the answer is no (the Bundle is
//     superseded and the new generation lists the resource too);
//   - installed resources get a controller ownerReference to their Bundle,
//     except the unowned kinds (CRDs, Namespaces, webhook configurations);
//   - readiness is the "Installed" condition, always written with
//     status.observedGeneration so a stale status is never taken for Ready.
//
// A real controller would report Installed once its Deployments are
// available; this one, on a cluster without kubelets, reports Applied on
// the first pass over a Bundle's generation and Installed on the next.
type bundleController struct {
	// exec supplies the family, the prune options and Finalize.
	exec *handoff.Executor
	// client and mapper are the controller's view of the cluster.
	client dynamic.Interface
	mapper meta.RESTMapper
	// unowned kinds are installed without an ownerReference.
	unowned []schema.GroupKind
}

// reconcile runs one pass over every Bundle of the family.
func (c *bundleController) reconcile(ctx context.Context) error {
	fam := c.exec.Family
	list, err := c.client.Resource(fam.Resource).List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
	if err != nil {
		return fmt.Errorf("list bundles: %w", err)
	}
	sets, err := fam.ObserveAll(list.Items)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sets {
		if err := c.reconcileBundle(ctx, s, sets); err != nil {
			errs = append(errs, fmt.Errorf("bundle %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *bundleController) reconcileBundle(ctx context.Context, s handoff.Set, family []handoff.Set) error {
	obj := s.Object
	has := slices.Contains(obj.GetFinalizers(), finalizer)
	if s.Deleting {
		if !has {
			return nil
		}
		if _, err := c.exec.Finalize(ctx, obj); err != nil {
			return fmt.Errorf("finalize: %w", err)
		}
		_, err := c.setFinalizers(ctx, obj, slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == finalizer }))
		return err
	}
	if !has {
		var err error
		if obj, err = c.setFinalizers(ctx, obj, append(slices.Clone(obj.GetFinalizers()), finalizer)); err != nil {
			return err
		}
	}
	guard := handoff.NewGuard(s, family)
	items, _, err := unstructured.NestedSlice(obj.Object, "spec", "resources")
	if err != nil {
		return err
	}
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return fmt.Errorf("spec.resources holds a %T", it)
		}
		want := &unstructured.Unstructured{Object: m}
		if ok, _ := guard.MayApply(handoff.RefOf(want)); !ok {
			continue
		}
		if err := c.apply(ctx, want, s); err != nil {
			return fmt.Errorf("apply %s: %w", handoff.RefOf(want), err)
		}
	}
	return c.report(ctx, obj)
}

// apply creates or updates one resource to match want, owned by the Bundle.
func (c *bundleController) apply(ctx context.Context, want *unstructured.Unstructured, s handoff.Set) error {
	client, err := c.resource(handoff.RefOf(want))
	if err != nil {
		return err
	}
	desired := want.DeepCopy()
	if !slices.Contains(c.unowned, want.GroupVersionKind().GroupKind()) {
		desired.SetOwnerReferences([]metav1.OwnerReference{c.exec.Family.OwnerReference(s)})
	}
	live, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, desired, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	next := live.DeepCopy()
	for k, v := range desired.Object {
		if k != "metadata" && k != "status" {
			next.Object[k] = v
		}
	}
	// Merge labels and annotations rather than replace them: other
	// controllers add their own (the deployment controller's revision
	// annotation), and removing those starts a write war.
	next.SetLabels(merged(live.GetLabels(), desired.GetLabels()))
	next.SetAnnotations(merged(live.GetAnnotations(), desired.GetAnnotations()))
	if refs := desired.GetOwnerReferences(); refs != nil {
		next.SetOwnerReferences(refs)
	}
	if equality.Semantic.DeepEqual(live.Object, next.Object) {
		return nil
	}
	_, err = client.Update(ctx, next, metav1.UpdateOptions{})
	return err
}

// report writes the Installed condition with status.observedGeneration:
// Applied (not yet Installed) on the first pass over a generation,
// Installed on the next.
func (c *bundleController) report(ctx context.Context, obj *unstructured.Unstructured) error {
	if c.exec.Family.Probe.Ready(obj).State == handoff.Ready {
		return nil
	}
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	cond := map[string]any{"type": conditionReady, "status": "False", "reason": "Applied", "message": "resources applied, not yet available"}
	if observed == obj.GetGeneration() {
		cond = map[string]any{"type": conditionReady, "status": "True", "reason": "Available"}
	}
	next := obj.DeepCopy()
	next.Object["status"] = map[string]any{"observedGeneration": obj.GetGeneration(), "conditions": []any{cond}}
	_, err := c.client.Resource(c.exec.Family.Resource).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}

// setFinalizers replaces the Bundle's finalizers, on the version read.
func (c *bundleController) setFinalizers(ctx context.Context, obj *unstructured.Unstructured, finalizers []string) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"finalizers":      finalizers,
	}})
	if err != nil {
		return nil, err
	}
	return c.client.Resource(c.exec.Family.Resource).Patch(ctx, obj.GetName(), types.MergePatchType, data, metav1.PatchOptions{})
}

func (c *bundleController) resource(r handoff.Ref) (dynamic.ResourceInterface, error) {
	m, err := c.mapper.RESTMapping(r.GroupKind())
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.client.Resource(m.Resource).Namespace(r.Namespace), nil
	}
	return c.client.Resource(m.Resource), nil
}

// merged returns base with over's entries on top, or nil if both are empty.
func merged(base, over map[string]string) map[string]string {
	if len(base)+len(over) == 0 {
		return nil
	}
	return labels.Merge(base, over)
}
