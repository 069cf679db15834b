package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	mf "github.com/manifestival/manifestival"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// This file holds the seams issue 22 added to the model: how executors
// reach listed resources (Executor.Objects: per call, one long-lived
// NewDynamicObjects, or ManifestivalObjects as tektoncd/operator wires
// it), kinds served at some API versions and not others, kinds that
// become served and unserved (CRDs installed and deleted by an admin,
// cert-manager), a second family of sets that lists some of the same
// objects, and an operator that stops reconciling a component once its
// removal Step reports it settled.

// The second family: Tekton Triggers' main sets, TektonInstallerSets too.
const (
	tComponent = "TektonTrigger"
	tPrefix    = "trigger-main-"
)

// Actors of the second family and of the cluster's admin.
const (
	actorSecondCtrl = "triggers-controller"
	actorSecondOp   = "triggers-operator"
	actorAdmin      = "admin"
)

// sharedWithTriggers are the objects both families list: an admission
// webhook configuration installed without an owner, and a ClusterRole the
// set controllers own. Their content is the same in both, so only their
// ownership and writer mark move.
func sharedWithTriggers() []any {
	return []any{
		manifest(kWebhook, "", "validation.webhook.triggers.tekton.dev", nil, map[string]any{"webhooks": []any{"triggers"}}),
		manifest(kClusterRole, "", "tekton-triggers-aggregate-view", nil, map[string]any{"rules": []any{"view"}}),
	}
}

func secondFamily() handoff.Family {
	return handoff.Family{
		Resource:        mSetGVR,
		Kind:            mSetKind,
		Selector:        map[string]string{mCreatedBy: tComponent, mType: "main"},
		GenerationLabel: mGeneration,
		HashAnnotation:  mHash,
		NamePrefix:      tPrefix,
		TargetNamespace: func(u *unstructured.Unstructured) string { return u.GetAnnotations()[mTargetNS] },
	}
}

// startSecond makes the second family's set controller and installs its
// component.
func (w *modelWorld) startSecond() error {
	client := &modelClient{w: w, actor: actorSecondCtrl, inner: w.c.ClientFor(actorSecondCtrl)}
	exec := &handoff.Executor{Family: secondFamily(), Dynamic: client, Mapper: w.fresh, Prune: mPrune(), RoleOrder: mRoles}
	w.second = &handofftest.SetController{
		Executor: exec, Client: client, Mapper: w.fresh, Finalizer: mFinalizer,
		ReadyAfter: 1, Unowned: mUnowned, SkipNotServed: true, OtherFamilies: true,
	}
	w.toggleSecond(context.Background())
	return nil
}

// toggleSecond removes the second component's live set, or installs the
// component again (a new set) when it has none.
func (w *modelWorld) toggleSecond(ctx context.Context) {
	if w.second == nil {
		return
	}
	sets := (&modelClient{w: w, actor: actorSecondOp, inner: w.c.ClientFor(actorSecondOp)}).Resource(mSetGVR)
	sel := secondFamily().LabelSelector()
	for _, o := range w.c.Objects() {
		if o.GetKind() == mSetKind && sel.Matches(labels.Set(o.GetLabels())) && o.GetDeletionTimestamp() == nil {
			_ = sets.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			return
		}
	}
	w.seconds++
	u := handofftest.Object(mSetGVR.GroupVersion().String(), mSetKind, "", fmt.Sprintf("%sstatic-%d", tPrefix, w.seconds),
		map[string]string{mCreatedBy: tComponent, mType: "main", mGeneration: "v1", handoff.DefaultRoleLabel: "static"},
		map[string]any{"spec": map[string]any{"manifests": append(sharedWithTriggers(),
			manifest(kConfigMap, nsA, "config-triggers", nil, map[string]any{"data": map[string]any{"k": "v"}}))}})
	u.SetAnnotations(map[string]string{mTargetNS: nsA})
	_, _ = sets.Create(ctx, u, metav1.CreateOptions{})
}

// reconcileSecond runs one pass of the second family's set controller.
func (w *modelWorld) reconcileSecond(ctx context.Context) {
	if w.second != nil {
		_ = w.second.Reconcile(ctx)
	}
}

// mfObjects is handoff.ManifestivalObjects as tektoncd/operator's patch
// builds it (ResourceClient): over a manifestival client that maps kinds
// as manifestival/client-go-client does, with a mapper that discovers on
// a miss, each kind at the versions the manifests give it.
//
// The executor reads through it with Gets in parallel (an mf.Client
// cannot list), which the model cannot interleave deterministically with
// other racers: its reads go as actor+readSuffix, which neither waits for
// a turn nor suffers faults. They read only, while the racer holds the
// turn; its writes go through the actor's client as any other.
func (w *modelWorld) mfObjects(actor string, client dynamic.Interface, manifests ...[]unstructured.Unstructured) handoff.Objects {
	return handoff.ManifestivalObjects{
		Client: splitMF{
			read:  handofftest.ManifestivalClient(w.c.ClientFor(actor+readSuffix), w.c.Mapper()),
			write: handofftest.ManifestivalClient(client, w.c.Mapper()),
		},
		Versions:  handoff.ManifestVersions(manifests...),
		NotServed: meta.IsNoMatchError,
	}
}

// readSuffix marks the actor of reads made outside the race (mfObjects).
const readSuffix = "/read"

// splitMF reads through one mf.Client and writes through another.
type splitMF struct{ read, write mf.Client }

func (s splitMF) Get(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return s.read.Get(obj)
}

func (s splitMF) Create(obj *unstructured.Unstructured, opts ...mf.ApplyOption) error {
	return s.write.Create(obj, opts...)
}

func (s splitMF) Update(obj *unstructured.Unstructured, opts ...mf.ApplyOption) error {
	return s.write.Update(obj, opts...)
}

func (s splitMF) Delete(obj *unstructured.Unstructured, opts ...mf.DeleteOption) error {
	return s.write.Delete(obj, opts...)
}

// setManifests returns a set's spec.manifests.
func setManifests(u *unstructured.Unstructured) []unstructured.Unstructured {
	items, _, _ := unstructured.NestedSlice(u.Object, "spec", "manifests")
	return manifestsFrom(items)
}

func manifestsFrom(items []any) []unstructured.Unstructured {
	out := make([]unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// executorFor returns the executor i as the operator runs it for one
// Step: with objManifestival, its Objects is made for the call from the
// manifests of the sets it may retire (those not of the desired
// generation) first, then of the others and of the desired generation,
// as the operator's informer and its manifests know them.
func (w *modelWorld) executorFor(i int) *handoff.Executor {
	e := w.execs[i]
	if w.cfg.Objects != objManifestival {
		return e
	}
	var old, rest [][]unstructured.Unstructured
	for _, o := range w.c.Objects() {
		if s := deriveSet(o); s.inFamily {
			if w.desired == nil || s.gen != genName(w.desired.Gen) {
				old = append(old, setManifests(o))
			} else {
				rest = append(rest, setManifests(o))
			}
		}
	}
	if d := w.desired; d != nil {
		for _, r := range d.roles() {
			rest = append(rest, manifestsFrom(w.cfg.manifests(d.Gen, r, d.H)))
		}
	}
	c := *e
	c.Objects = w.mfObjects(fmt.Sprintf("executor-%d", i+1), e.Dynamic, append(old, rest...)...)
	return &c
}

// finalizerFor returns the executor whose Finalize the set controller
// calls for set: with objManifestival, its Objects is made for the call
// from the set's manifests first, then its successors' (the family as the
// pass sees it), as tektoncd/operator's finalizer does.
func (w *modelWorld) finalizerFor(set *unstructured.Unstructured, family []handoff.Set) *handoff.Executor {
	e := w.ctrl.Executor
	if w.cfg.Objects != objManifestival {
		return e
	}
	lists := [][]unstructured.Unstructured{setManifests(set)}
	for _, s := range family {
		if s.UID != set.GetUID() && s.Object != nil {
			lists = append(lists, setManifests(s.Object))
		}
	}
	c := *e
	c.Objects = w.mfObjects("controller", e.Dynamic, lists...)
	return &c
}

// stepped sees a Step return. A removal Step that reports the component
// settled (no error, no requeue) is the last the operator makes: it drops
// its own finalizer and never reconciles the component again, so no set
// of the family may be left on the API server at that moment.
func (w *modelWorld) stepped(actor string, d *handoff.Desired, res handoff.Result, err error) {
	var ue *handoff.UnrecordedError
	if errors.As(err, &ue) {
		for _, r := range ue.Left {
			w.unrecorded[handofftest.Key{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}] = true
		}
	}
	if d != nil || err != nil || res.Requeue {
		return
	}
	w.dropped = true
	var left []string
	sel := w.fam.LabelSelector()
	for _, o := range w.c.Objects() {
		if o.GetKind() == mSetKind && sel.Matches(labels.Set(o.GetLabels())) {
			left = append(left, deriveSet(o).String())
		}
	}
	if len(left) > 0 {
		w.vs = append(w.vs, violation{Inv: "I3-removal", Op: w.op, At: w.c.Now(),
			Msg: fmt.Sprintf("%s's removal Step returned settled (the operator stops reconciling) while the API server holds sets of the family: %s (plan %s)",
				actor, strings.Join(left, ", "), res.Plan.Phase)})
	}
}

// finalized sees a Finalize return: what it reports handed over must
// have been handed over. No HandedOver item may still name the retiring
// set among its ownerReferences when the call returns (a report of a
// handover that did not happen hides an object the garbage collector is
// about to take). Who moved it is not checked: the executor's retirement
// may have, before the set was deleted.
func (w *modelWorld) finalized(set *unstructured.Unstructured, res handoff.FinalizeResult) {
	for _, it := range res.HandedOver {
		live, ok := w.c.Get(handofftest.Key{Group: it.Ref.Group, Kind: it.Ref.Kind, Namespace: it.Ref.Namespace, Name: it.Ref.Name})
		if !ok {
			continue
		}
		for _, o := range live.GetOwnerReferences() {
			if o.UID == set.GetUID() {
				w.vs = append(w.vs, violation{Inv: "report", Op: w.op, At: w.c.Now(),
					Msg: fmt.Sprintf("Finalize of %s reports %s handed over (%s), but it is still owned by the set", set.GetName(), it.Ref, it.Reason)})
			}
		}
	}
}

// Admin operations (opAdmin variants).
const (
	// adminCertManager installs cert-manager, or uninstalls it (its
	// Certificates go with its CRD).
	adminCertManager = iota
	// adminTriggersCRDs deletes Tekton Triggers' CRDs, and with them their
	// objects, as the API server does; a set that lists them has its
	// controller create them again.
	adminTriggersCRDs
	// adminUpgrade upgrades the cluster to a release that no longer serves
	// the old API versions (mOldVersions).
	adminUpgrade
	adminVariants
)

func adminString(v int) string {
	switch v {
	case adminCertManager:
		return "admin installs or uninstalls cert-manager"
	case adminTriggersCRDs:
		return "admin deletes Tekton Triggers' CRDs and their objects"
	}
	return "cluster upgrade: old API versions (autoscaling/v2beta2, admissionregistration.k8s.io/v1beta1) no longer served"
}

func (w *modelWorld) admin(ctx context.Context, variant int) {
	client := &modelClient{w: w, actor: actorAdmin, inner: w.c.ClientFor(actorAdmin)}
	switch variant {
	case adminCertManager:
		if !w.serves(kCert) {
			crd := handofftest.Object(kCRD.apiVersion(), kCRD.kind, "", kCert.crd, nil, map[string]any{"spec": map[string]any{"group": kCert.gvr.Group}})
			_, _ = client.Resource(kCRD.gvr).Create(ctx, crd, metav1.CreateOptions{})
			return
		}
		w.uninstall(ctx, client, kCert)
	case adminTriggersCRDs:
		w.uninstall(ctx, client, kInterceptor)
		w.uninstall(ctx, client, kListener)
	case adminUpgrade:
		for _, gvr := range mOldVersions {
			w.c.Unregister(gvr)
		}
		w.fresh.Reset()
	}
}

// serveOptional installs what serves the optional kinds sets list
// (cert-manager, the Prometheus operator), as the final convergence's
// first step: no set can be retired while a live set lists an object of a
// kind the cluster does not serve (there is no reaching it to hand it
// over; the library says so with ErrNotServed and the set stays), so
// convergence needs every listed kind served.
func (w *modelWorld) serveOptional(ctx context.Context) {
	client := &modelClient{w: w, actor: actorAdmin, inner: w.c.ClientFor(actorAdmin)}
	for _, k := range []mKind{kCert, kMonitor} {
		if !w.serves(k) {
			crd := handofftest.Object(kCRD.apiVersion(), kCRD.kind, "", k.crd, nil, map[string]any{"spec": map[string]any{"group": k.gvr.Group}})
			_, _ = client.Resource(kCRD.gvr).Create(ctx, crd, metav1.CreateOptions{})
		}
	}
}

// uninstall deletes the objects of a custom kind, then its CRD.
func (w *modelWorld) uninstall(ctx context.Context, client dynamic.Interface, k mKind) {
	if !w.c.Exists(handofftest.Key{Group: kCRD.gvr.Group, Kind: kCRD.kind, Name: k.crd}) {
		return
	}
	if w.serves(k) {
		if list, err := client.Resource(k.gvr).List(ctx, metav1.ListOptions{}); err == nil {
			for _, o := range list.Items {
				_ = client.Resource(k.gvr).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			}
		}
	}
	_ = client.Resource(kCRD.gvr).Delete(ctx, k.crd, metav1.DeleteOptions{})
}

// unserved returns the kinds of the model the cluster does not serve now.
func (w *modelWorld) unserved() map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, k := range mKinds {
		if !w.serves(k) {
			out[k.gk()] = true
		}
	}
	return out
}
