package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/kube-handoff/handoff"
	mf "github.com/manifestival/manifestival"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
//     superseded and the new generation lists the resource too), and asks
//     [handoff.Guard.MayWrite] of the live object before updating it;
//   - it applies a Bundle's resources with manifestival (Filter by the
//     guard, Transform to set owners and stamp, Apply: a three-way merge
//     that keeps what other controllers write), through [mfClient] wrapped
//     by the guard ([handoff.ManifestivalGuard]: its filter, stamp and
//     client are the three asks above);
//   - installed resources get a controller ownerReference to their Bundle,
//     except the unowned kinds (CRDs, Namespaces, webhook configurations),
//     and every one the Bundle's writer mark ([handoff.Guard.Stamp]), which
//     MayWrite reads where there is no controller ownerReference;
//   - readiness is the "Installed" condition, always written with
//     status.observedGeneration so a stale status is never taken for Ready;
//     while the Bundle carries the superseded mark it is False with reason
//     [handoff.ReasonSuperseded], so a Bundle released by a rollback is
//     Installed again only after a pass that applied it;
//   - a Bundle that cannot be read whole is reported and left alone, and
//     does not stop the pass over the others.
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
	sets, _ := fam.ObserveAll(list.Items) // each unreadable Bundle's error is returned below
	var errs []error
	for _, s := range sets {
		if err := c.reconcileBundle(ctx, s, sets); err != nil {
			if s.Invalid == nil {
				err = fmt.Errorf("bundle %s: %w", s.Name, err)
			}
			errs = append(errs, err)
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
			return fmt.Errorf("finalize: %w", err) // an unreadable Bundle stays held here
		}
		_, err := c.setFinalizers(ctx, obj, slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == finalizer }))
		return err
	}
	if s.Invalid != nil {
		return s.Invalid // its generation, role or resources cannot be read: apply nothing
	}
	if !has {
		var err error
		if obj, err = c.setFinalizers(ctx, obj, append(slices.Clone(obj.GetFinalizers()), finalizer)); err != nil {
			return err
		}
	}
	guard := handoff.ManifestivalGuard{Guard: handoff.NewGuard(s, family), ClusterScoped: c.exec.Family.ClusterScoped}
	items, _, err := unstructured.NestedSlice(obj.Object, "spec", "resources")
	if err != nil {
		return err
	}
	objs := make([]unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return fmt.Errorf("spec.resources holds a %T", it)
		}
		objs = append(objs, unstructured.Unstructured{Object: m})
	}
	// Apply as a manifestival operator does (a three-way merge with the
	// last-applied annotation, so other controllers' fields are kept),
	// leaving alone what the guard refuses (a newer generation lists it,
	// or a set this pass does not know wrote it last) and owning and
	// stamping the rest.
	m, err := mf.ManifestFrom(mf.Slice(objs), mf.UseClient(guard.Client(&mfClient{ctx: ctx, c: c})))
	if err != nil {
		return err
	}
	m, err = m.Filter(guard.MayApply).Transform(c.own(s), guard.Stamp)
	if err != nil {
		return err
	}
	if err := m.Apply(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return c.report(ctx, s, obj)
}

// own gives every resource but the unowned kinds a controller
// ownerReference to the Bundle.
func (c *bundleController) own(s handoff.Set) mf.Transformer {
	ref := c.exec.Family.OwnerReference(s)
	return func(u *unstructured.Unstructured) error {
		if !slices.Contains(c.unowned, u.GroupVersionKind().GroupKind()) {
			u.SetOwnerReferences([]metav1.OwnerReference{ref})
		}
		return nil
	}
}

// report writes the Installed condition with status.observedGeneration:
// False (Superseded) while the Bundle carries the superseded mark; else
// Applied (not yet Installed) on the first pass over a generation, and
// Installed on the next, which for a released Bundle is the first pass
// after the release. It writes nothing when the status already says so.
func (c *bundleController) report(ctx context.Context, s handoff.Set, obj *unstructured.Unstructured) error {
	var cond map[string]any
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	switch {
	case s.SupersededBy != "":
		cond = map[string]any{"type": conditionReady, "status": "False", "reason": handoff.ReasonSuperseded, "message": "superseded by generation " + s.SupersededBy}
	case c.exec.Family.Probe.Ready(obj).State == handoff.Ready:
		return nil
	case observed == obj.GetGeneration():
		cond = map[string]any{"type": conditionReady, "status": "True", "reason": "Available"}
	default:
		cond = map[string]any{"type": conditionReady, "status": "False", "reason": "Applied", "message": "resources applied, not yet available"}
	}
	status := map[string]any{"observedGeneration": obj.GetGeneration(), "conditions": []any{cond}}
	if equality.Semantic.DeepEqual(obj.Object["status"], status) {
		return nil
	}
	next := obj.DeepCopy()
	next.Object["status"] = status
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

// mfClient is manifestival's Client over the controller's dynamic client,
// for one reconcile of one Bundle (an operator would use
// manifestival/client-go-client). The guard's Client wraps it.
// manifestival updates the object it read, resourceVersion included, so a
// write in between fails with a conflict.
type mfClient struct {
	ctx context.Context
	c   *bundleController
}

var _ mf.Client = (*mfClient)(nil)

func (m *mfClient) Create(u *unstructured.Unstructured, opts ...mf.ApplyOption) error {
	r, err := m.c.resource(handoff.RefOf(u))
	if err != nil {
		return err
	}
	_, err = r.Create(m.ctx, u, *mf.ApplyWith(opts).ForCreate)
	return err
}

func (m *mfClient) Update(u *unstructured.Unstructured, opts ...mf.ApplyOption) error {
	r, err := m.c.resource(handoff.RefOf(u))
	if err != nil {
		return err
	}
	_, err = r.Update(m.ctx, u, *mf.ApplyWith(opts).ForUpdate)
	return err
}

func (m *mfClient) Delete(u *unstructured.Unstructured, opts ...mf.DeleteOption) error {
	r, err := m.c.resource(handoff.RefOf(u))
	if err != nil {
		return err
	}
	o := mf.DeleteWith(opts)
	err = r.Delete(m.ctx, u.GetName(), *o.ForDelete)
	if o.IgnoreNotFound && apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (m *mfClient) Get(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := m.c.resource(handoff.RefOf(u))
	if err != nil {
		return nil, err
	}
	return r.Get(m.ctx, u.GetName(), metav1.GetOptions{})
}
