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
// TektonInstallerSet reconciler, keeping the library's set-controller
// contract:
//
//   - it applies each set's spec.manifests, namespaced resources listed
//     without a namespace into the set's [handoff.Family.TargetNamespace]
//     (the scope of a kind from [handoff.Family.ClusterScoped], else from
//     its Mapper), with a controller ownerReference to the set except for
//     the kinds in Unowned (the object's other owners, such as those a
//     handover added, are kept);
//   - it honours the coexistence guard: MayApply for every resource,
//     MayWrite of the live object before an update, which goes with the
//     resourceVersion read; and it stamps everything it writes with the
//     writing set ([handoff.Guard.Stamp]), so MayWrite can tell who wrote
//     the kinds installed without an owner;
//   - it reports Ready=False with reason [handoff.ReasonSuperseded] while a
//     set carries the superseded mark, and otherwise marks a set Ready for
//     its current generation ReadyAfter passes after it first saw that
//     generation or the set's release, whichever is later (and once
//     ReadyWhen agrees), always with status.observedGeneration;
//   - it runs the library's Finalize from a real finalizer.
//
// A pass over a set whose state is already what it would write writes
// nothing. Sets that cannot be read whole ([handoff.Set.Invalid]) are not
// applied, their errors are returned, and the other sets are reconciled;
// one that is being deleted has Finalize called for it, which fails, so it
// keeps its finalizer.
type SetController struct {
	// Executor supplies the family, the prune options and Finalize.
	Executor *handoff.Executor
	// Client and Mapper are the controller's own view of the cluster. A
	// [meta.ResettableRESTMapper] that does not know a listed kind is reset
	// and asked again, as a controller that discovers on a miss does.
	Client dynamic.Interface
	Mapper meta.RESTMapper
	// Finalizer is the finalizer the controller puts on sets.
	Finalizer string
	// ReadyAfter is how many passes a set's generation takes to get Ready,
	// counted again from a release.
	ReadyAfter int
	// ReadyWhen, if set, must also report true before a set is marked
	// Ready: a test keeps a generation NotReady with it, and on a real
	// cluster it checks what the set installed (its Deployments Available
	// for their current generation). An error is returned from Reconcile
	// and the set stays NotReady.
	ReadyWhen func(ctx context.Context, set *unstructured.Unstructured) (bool, error)
	// Unowned kinds are installed without an ownerReference; every other
	// kind gets a controller ownerReference to its set. Package
	// tektonfixture's Unowned lists tektoncd/operator's: CRDs, Namespaces
	// and admission webhook configurations, so that APIServices and PVCs
	// do get an owner.
	// [NewWorld] also leaves APIServices without one.
	Unowned []schema.GroupKind
	// List, if set, replaces the controller's List of the family's sets at
	// the start of each pass: a test hands it an old list, as a lagging
	// informer cache would. Writes still go to the cluster.
	List func(ctx context.Context) (*unstructured.UnstructuredList, error)
	// Legacy, when true, finalizes the way tektoncd/operator does today:
	// it deletes every listed resource by name, whoever owns it, and
	// ignores the coexistence guard (it neither asks nor stamps).
	Legacy bool
	// Finalize, if set, is called in place of Executor.Finalize for a set
	// being deleted, with the family as the pass sees it: an operator that
	// builds what its finalizer needs for each call (tektoncd/operator
	// reaches the resources through a manifestival client told the API
	// versions of the set's manifests) does it here. An error keeps the
	// finalizer.
	Finalize func(ctx context.Context, set *unstructured.Unstructured, family []handoff.Set) (handoff.FinalizeResult, error)
	// OtherFamilies makes each pass also list every set of the family's
	// resource and give the coexistence guard those outside the family
	// (handoff.NewGuard's others), as a controller of every set of the
	// kind (tektoncd/operator's) knows them: it then leaves alone an object
	// a live set of another family wrote last.
	OtherFamilies bool
	// SkipNotServed leaves out a listed resource whose kind the cluster
	// does not serve (Mapper does not know it, after a reset) instead of
	// failing the set's pass, as an operator does whose manifests hold
	// optional kinds (cert-manager's, on a cluster without cert-manager).
	SkipNotServed bool

	seen map[types.UID]seen
}

// seen is what the controller counts of one set.
type seen struct {
	generation int64
	count      int // passes over generation since it was first seen or released
}

// Reconcile runs one pass over every set of the family. It returns the
// errors of the sets it could not reconcile, joined; one set's error does
// not stop the others.
func (c *SetController) Reconcile(ctx context.Context) error {
	fam := c.family()
	list, err := c.list(ctx)
	if err != nil {
		return err
	}
	sets, _ := fam.ObserveAll(list.Items) // each invalid set is reported below
	others, err := c.others(ctx, fam)
	if err != nil {
		return err
	}
	if c.seen == nil {
		c.seen = map[types.UID]seen{}
	}
	var errs []error
	for _, s := range sets {
		if err := c.reconcileSet(ctx, fam, s, sets, others); err != nil {
			if s.Invalid == nil || !errors.Is(err, handoff.ErrInvalidSet) {
				err = fmt.Errorf("set %s: %w", s.Name, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// others lists the sets of the family's resource outside the family, with
// OtherFamilies.
func (c *SetController) others(ctx context.Context, fam handoff.Family) ([]handoff.Set, error) {
	if !c.OtherFamilies {
		return nil, nil
	}
	all, err := c.Client.Resource(fam.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	sel := fam.LabelSelector()
	var out []handoff.Set
	for i := range all.Items {
		u := &all.Items[i]
		if !sel.Matches(labels.Set(u.GetLabels())) {
			out = append(out, handoff.Set{Name: u.GetName(), UID: u.GetUID(), Deleting: u.GetDeletionTimestamp() != nil, Object: u})
		}
	}
	return out, nil
}

// family is the executor's family, with the scope of listed kinds from the
// controller's mapper where the family does not say it, so that what the
// controller applies is what the executor sees the set list.
func (c *SetController) family() handoff.Family {
	fam := c.Executor.Family
	if fam.ClusterScoped == nil && c.Mapper != nil {
		fam.ClusterScoped = handoff.ScopeFrom(c.Mapper)
	}
	return fam
}

func (c *SetController) list(ctx context.Context) (*unstructured.UnstructuredList, error) {
	if c.List != nil {
		return c.List(ctx)
	}
	fam := c.Executor.Family
	return c.Client.Resource(fam.Resource).List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
}

func (c *SetController) reconcileSet(ctx context.Context, fam handoff.Family, s handoff.Set, family, others []handoff.Set) error {
	sets := c.Client.Resource(fam.Resource)
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
		} else if _, err := c.finalize(ctx, obj, family); err != nil {
			return err
		}
		rest := slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == c.Finalizer })
		_, err := patchMeta(ctx, sets, obj, map[string]any{"finalizers": rest})
		return err
	}
	if s.Invalid != nil {
		return s.Invalid
	}
	if !has {
		var err error
		if obj, err = patchMeta(ctx, sets, obj, map[string]any{"finalizers": append(slices.Clone(obj.GetFinalizers()), c.Finalizer)}); err != nil {
			return err
		}
	}
	guard := handoff.NewGuard(s, family, others...)
	ns := ""
	if fam.TargetNamespace != nil {
		ns = fam.TargetNamespace(obj)
	}
	manifests, _, _ := unstructured.NestedSlice(obj.Object, "spec", "manifests")
	for _, m := range manifests {
		want := &unstructured.Unstructured{Object: m.(map[string]any)}
		if ns != "" && want.GetNamespace() == "" && !fam.ClusterScoped(want.GroupVersionKind().GroupKind()) {
			want.SetNamespace(ns)
		}
		if ok, _ := guard.MayApply(handoff.RefOf(want)); !ok && !c.Legacy {
			continue
		}
		if err := c.apply(ctx, fam, want, s, guard); err != nil {
			if c.SkipNotServed && meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("apply %s: %w", handoff.RefOf(want), err)
		}
	}
	st := c.seen[s.UID]
	if st.generation != obj.GetGeneration() {
		st = seen{generation: obj.GetGeneration()}
	}
	if s.SupersededBy != "" {
		// Not Ready while superseded; the count starts again at the
		// release, so the set is Ready again only after passes that
		// applied it as released.
		st.count = 0
		c.seen[s.UID] = st
		return c.writeStatus(ctx, sets, obj, "False", handoff.ReasonSuperseded, "superseded by generation "+s.SupersededBy)
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
	return c.writeStatus(ctx, sets, obj, "True", "Installed", "")
}

func (c *SetController) finalize(ctx context.Context, set *unstructured.Unstructured, family []handoff.Set) (handoff.FinalizeResult, error) {
	if c.Finalize != nil {
		return c.Finalize(ctx, set, family)
	}
	return c.Executor.Finalize(ctx, set)
}

// writeStatus writes the set's Ready condition with observedGeneration,
// unless the status already says so.
func (c *SetController) writeStatus(ctx context.Context, sets dynamic.ResourceInterface, obj *unstructured.Unstructured, status, reason, message string) error {
	cond := map[string]any{"type": "Ready", "status": status, "reason": reason}
	if message != "" {
		cond["message"] = message
	}
	want := map[string]any{"observedGeneration": obj.GetGeneration(), "conditions": []any{cond}}
	if equality.Semantic.DeepEqual(obj.Object["status"], want) {
		return nil
	}
	next := obj.DeepCopy()
	next.Object["status"] = want
	_, err := sets.UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}

// apply creates or updates one resource so that it matches want, is
// controlled by the set (but for the Unowned kinds; other owners it has are
// kept) and carries the set's writer mark, as tektoncd/operator's
// transformers do. It leaves an existing resource
// alone when guard.MayWrite refuses it, and writes with the resourceVersion
// it read, so a concurrent write makes it fail. A resource already as
// wanted is not written. Before a create it reads the set from the API
// server and creates nothing for a set that is gone or being deleted.
func (c *SetController) apply(ctx context.Context, fam handoff.Family, want *unstructured.Unstructured, s handoff.Set, guard handoff.Guard) error {
	client, err := c.resource(handoff.RefOf(want))
	if err != nil {
		return err
	}
	desired := want.DeepCopy()
	owned := !slices.Contains(c.Unowned, want.GroupVersionKind().GroupKind())
	if owned {
		desired.SetOwnerReferences([]metav1.OwnerReference{fam.OwnerReference(s)})
	}
	if !c.Legacy {
		guard.Stamp(desired)
	}
	live, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if !c.Legacy {
			// MayWrite cannot check a create. Confirm on the API server
			// that the set is live, so a pass whose view lags does not
			// re-create what the set's finalizer already removed.
			cur, err := c.Client.Resource(fam.Resource).Get(ctx, s.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (cur.GetUID() != s.UID || cur.GetDeletionTimestamp() != nil)) {
				return nil
			}
			if err != nil {
				return err
			}
		}
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
	if owned {
		next.SetOwnerReferences(withController(live.GetOwnerReferences(), fam.OwnerReference(s)))
	}
	if equality.Semantic.DeepEqual(live.Object, next.Object) {
		return nil
	}
	_, err = client.Update(ctx, next, metav1.UpdateOptions{})
	return err
}

// withController returns refs with own as the controller reference, in
// place of the one there was; the other references are kept, in their
// order, so that the owners a handover adds (every live set that lists a
// kept object) stay, and an object already so owned is not written.
func withController(refs []metav1.OwnerReference, own metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	placed := false
	for _, r := range refs {
		if r.UID == own.UID || (r.Controller != nil && *r.Controller) {
			if !placed {
				out = append(out, own)
				placed = true
			}
			continue
		}
		out = append(out, r)
	}
	if !placed {
		out = append(out, own)
	}
	return out
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
	if rm, ok := c.Mapper.(meta.ResettableRESTMapper); ok && meta.IsNoMatchError(err) {
		rm.Reset()
		m, err = c.Mapper.RESTMapping(r.GroupKind())
	}
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
