package handofftest

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

// SetController simulates a set controller such as tektoncd/operator's
// TektonInstallerSet reconciler: it applies each set's spec.manifests with
// a controller ownerReference to the set (except for the kinds in
// Unowned), honours the coexistence guard (MayApply, and MayWrite on the
// live object), marks the set Ready for its current generation ReadyAfter
// reconciles after it first saw that generation (and once ReadyWhen
// agrees), and runs the library's Finalize from a real finalizer.
type SetController struct {
	// Executor supplies the family, the prune options and Finalize.
	Executor *handoff.Executor
	// Client and Mapper are the controller's own view of the cluster.
	Client dynamic.Interface
	Mapper meta.RESTMapper
	// Finalizer is the finalizer the controller puts on sets.
	Finalizer string
	// ReadyAfter is how many reconciles a set's generation takes to get Ready.
	ReadyAfter int
	// ReadyWhen, if set, must also report true before a set is marked
	// Ready: a test keeps a generation NotReady with it, and on a real
	// cluster it checks what the set installed (its Deployments Available
	// for their current generation). An error is returned from Reconcile
	// and the set stays NotReady.
	ReadyWhen func(ctx context.Context, set *unstructured.Unstructured) (bool, error)
	// Unowned kinds are installed without an ownerReference.
	Unowned []schema.GroupKind
	// List, if set, replaces the controller's List of the family's sets at
	// the start of each pass: a test hands it an old list, as a lagging
	// informer cache would. Writes still go to the cluster.
	List func(ctx context.Context) (*unstructured.UnstructuredList, error)
	// Legacy, when true, finalizes the way tektoncd/operator does today:
	// it deletes every listed resource by name, whoever owns it, and
	// ignores the coexistence guard.
	Legacy bool

	seen map[types.UID]seen
}

type seen struct {
	generation int64
	count      int
}

// Reconcile runs one pass over every set of the family.
func (c *SetController) Reconcile(ctx context.Context) error {
	fam := c.Executor.Family
	list, err := c.list(ctx)
	if err != nil {
		return err
	}
	sets, err := fam.ObserveAll(list.Items)
	if err != nil {
		return err
	}
	if c.seen == nil {
		c.seen = map[types.UID]seen{}
	}
	var errs []error
	for _, s := range sets {
		if err := c.reconcileSet(ctx, s, sets); err != nil {
			errs = append(errs, fmt.Errorf("set %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *SetController) list(ctx context.Context) (*unstructured.UnstructuredList, error) {
	if c.List != nil {
		return c.List(ctx)
	}
	fam := c.Executor.Family
	return c.Client.Resource(fam.Resource).List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
}

func (c *SetController) reconcileSet(ctx context.Context, s handoff.Set, family []handoff.Set) error {
	sets := c.Client.Resource(c.Executor.Family.Resource)
	obj := s.Object
	has := slices.Contains(obj.GetFinalizers(), c.Finalizer)
	if s.Deleting {
		if !has {
			return nil
		}
		if c.Legacy {
			if err := c.deleteAllByName(ctx, obj); err != nil {
				return err
			}
		} else if _, err := c.Executor.Finalize(ctx, obj); err != nil {
			return err
		}
		rest := slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == c.Finalizer })
		_, err := patchMeta(ctx, sets, obj, map[string]any{"finalizers": rest})
		return err
	}
	if !has {
		var err error
		if obj, err = patchMeta(ctx, sets, obj, map[string]any{"finalizers": append(slices.Clone(obj.GetFinalizers()), c.Finalizer)}); err != nil {
			return err
		}
	}
	guard := handoff.NewGuard(s, family)
	manifests, _, _ := unstructured.NestedSlice(obj.Object, "spec", "manifests")
	for _, m := range manifests {
		want := &unstructured.Unstructured{Object: m.(map[string]any)}
		if ok, _ := guard.MayApply(handoff.RefOf(want)); !ok && !c.Legacy {
			continue
		}
		if err := c.apply(ctx, want, s, guard); err != nil {
			return fmt.Errorf("apply %s: %w", handoff.RefOf(want), err)
		}
	}
	st := c.seen[s.UID]
	if st.generation != obj.GetGeneration() {
		st = seen{generation: obj.GetGeneration()}
	}
	st.count++
	c.seen[s.UID] = st
	if st.count < c.ReadyAfter || s.Readiness.State == handoff.Ready {
		return nil
	}
	if c.ReadyWhen != nil {
		if ok, err := c.ReadyWhen(ctx, obj); err != nil || !ok {
			return err
		}
	}
	next := obj.DeepCopy()
	next.Object["status"] = map[string]any{
		"observedGeneration": obj.GetGeneration(),
		"conditions":         []any{map[string]any{"type": "Ready", "status": "True", "reason": "Installed"}},
	}
	_, err := sets.UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}

// apply creates or updates one resource so that it matches want and is
// owned by the set, as tektoncd/operator's transformers do. It leaves an
// existing resource alone when guard.MayWrite refuses it, and writes with
// the resourceVersion it read, so a concurrent write makes it fail.
func (c *SetController) apply(ctx context.Context, want *unstructured.Unstructured, s handoff.Set, guard handoff.Guard) error {
	client, err := c.resource(handoff.RefOf(want))
	if err != nil {
		return err
	}
	desired := want.DeepCopy()
	if !slices.Contains(c.Unowned, want.GroupVersionKind().GroupKind()) {
		desired.SetOwnerReferences([]metav1.OwnerReference{c.Executor.Family.OwnerReference(s)})
	}
	live, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, desired, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if ok, _ := guard.MayWrite(live); !ok && !c.Legacy {
		return nil
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

// deleteAllByName is tektoncd/operator's finalizer today: every listed
// resource is deleted by name, except Namespaces, PVCs and CRDs.
func (c *SetController) deleteAllByName(ctx context.Context, set *unstructured.Unstructured) error {
	manifests, _, _ := unstructured.NestedSlice(set.Object, "spec", "manifests")
	for _, m := range manifests {
		u := &unstructured.Unstructured{Object: m.(map[string]any)}
		switch u.GetKind() {
		case "Namespace", "PersistentVolumeClaim", "CustomResourceDefinition":
			continue
		}
		client, err := c.resource(handoff.RefOf(u))
		if err != nil {
			return err
		}
		if err := client.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func (c *SetController) resource(r handoff.Ref) (dynamic.ResourceInterface, error) {
	m, err := c.Mapper.RESTMapping(r.GroupKind())
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Client.Resource(m.Resource).Namespace(r.Namespace), nil
	}
	return c.Client.Resource(m.Resource), nil
}

func patchMeta(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, fields map[string]any) (*unstructured.Unstructured, error) {
	fields["resourceVersion"] = obj.GetResourceVersion()
	data, err := json.Marshal(map[string]any{"metadata": fields})
	if err != nil {
		return nil, err
	}
	return client.Patch(ctx, obj.GetName(), types.MergePatchType, data, metav1.PatchOptions{})
}

// merged returns base with over's entries on top, or nil if both are empty.
func merged(base, over map[string]string) map[string]string {
	if len(base)+len(over) == 0 {
		return nil
	}
	return labels.Merge(base, over)
}
