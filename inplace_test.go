package handoff_test

// In-place generations (issue 23): sets that own nothing, objects owned by
// the component object (the "legacy owner"), and readiness read from the
// objects a set lists (ObjectProbe), as an operator without set objects
// (knative/operator) needs them.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// deploymentProbe is an ObjectProbe that reads Deployments only: a set is
// Ready when check passes each Deployment it lists (an empty reason).
type deploymentProbe struct {
	check func(s handoff.Set, ref handoff.Ref, obj *unstructured.Unstructured) (reason, message string)
}

func (deploymentProbe) Ready(*unstructured.Unstructured) handoff.Readiness {
	return handoff.Readiness{State: handoff.NotReady, Reason: "NotRead"}
}

func (deploymentProbe) Reads(ref handoff.Ref) bool { return ref.Kind == "Deployment" }

func (p deploymentProbe) ReadyFrom(s handoff.Set, live func(handoff.Ref) (*unstructured.Unstructured, error)) handoff.Readiness {
	for _, ref := range s.Resources {
		if ref.Kind != "Deployment" {
			continue
		}
		obj, err := live(ref)
		if err != nil {
			return handoff.Readiness{State: handoff.NotReady, Reason: "Missing", Message: err.Error()}
		}
		if reason, msg := p.check(s, ref, obj); reason != "" {
			return handoff.Readiness{State: handoff.NotReady, Reason: reason, Message: msg}
		}
	}
	return handoff.Readiness{State: handoff.Ready}
}

// appliedProbe is a deploymentProbe: a Deployment is rolled out for a set
// when its "applied" annotation names the set's generation (as a rollout
// of that generation's spec would be). It records what it read.
func appliedProbe(reads *[]handoff.Ref) deploymentProbe {
	return deploymentProbe{check: func(s handoff.Set, ref handoff.Ref, obj *unstructured.Unstructured) (string, string) {
		*reads = append(*reads, ref)
		if got := obj.GetAnnotations()["applied"]; got != s.Generation {
			return "Rolling", ref.Name + " at " + got
		}
		return "", ""
	}}
}

const crUID = types.UID("uid-knativeserving")

// ownedByCR gives obj a controller ownerReference to the component object.
func ownedByCR(obj *unstructured.Unstructured) *unstructured.Unstructured {
	t := true
	obj = obj.DeepCopy()
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "operator.knative.dev/v1beta1", Kind: "KnativeServing",
		Name: "knative-serving", UID: crUID, Controller: &t, BlockOwnerDeletion: &t}})
	return obj
}

func TestInPlaceGenerationWithLegacyOwner(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	var reads []handoff.Ref
	f.fam.Probe = appliedProbe(&reads)
	f.exec.Family = f.fam
	f.exec.Prune.Owners = []types.UID{crUID}
	f.exec.Prune.AnyUnowned = true

	dep := mkObj("apps/v1", "Deployment", testNS, "controller", "")
	shared, oldOnly, kept, foreign := cm("config"), cm("old-secret"), cm("kept"), cm("someone-elses")
	kept.SetAnnotations(map[string]string{handoff.DefaultKeepAnnotation: handoff.KeepValue})
	hook := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.serving", "")
	oldHook := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "config.serving", "")
	other := ownedByCR(foreign)
	other.SetOwnerReferences(append(other.GetOwnerReferences(), metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-pod"}))

	catalog := handofftest.Catalog{}
	v1 := catalog.Desire("v1", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {shared, oldOnly, kept, other, hook, oldHook, dep}})
	f.exec.Build = catalog.Build
	applied := dep.DeepCopy()
	applied.SetAnnotations(map[string]string{"applied": "v1"})
	// v1 installed: the sets own nothing; namespaced objects are owned by
	// the component object, cluster-scoped ones by nobody.
	f.seed(t, nil, []*unstructured.Unstructured{ownedByCR(shared), ownedByCR(oldOnly), ownedByCR(kept), other, hook, oldHook, ownedByCR(applied)}, nil)
	if err := f.steps(t, v1, 5, nil); err != nil {
		t.Fatal(err)
	}
	before := map[string]*unstructured.Unstructured{}
	for _, k := range []handofftest.Key{cmKey("config"), {Group: "apps", Kind: "Deployment", Namespace: testNS, Name: "controller"}, {Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "validation.serving"}} {
		o, _ := f.c.Get(k)
		before[k.String()] = o
	}

	// v2 keeps config, the webhook and the Deployment (same names) and
	// drops the rest.
	v2 := catalog.Desire("v2", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {shared, hook, dep}})
	for i := 0; i < 4; i++ {
		res, err := f.exec.Step(ctx, v2)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Plan.Of(handoff.ActionRetire)) > 0 {
			t.Fatalf("step %d retired v1 while the Deployment still runs v1: %s", i, res.Plan)
		}
		if i == 0 && res.Reads.Lists == 0 {
			t.Errorf("the readiness read no List of the Deployments: %+v", res.Reads)
		}
	}
	for _, k := range []string{"old-secret", "kept", "someone-elses"} {
		if !f.c.Exists(cmKey(k)) {
			t.Fatalf("%s deleted before v2 rolled out", k)
		}
	}
	// The operator applies v2: the Deployment rolls out.
	live, _ := f.c.Get(handofftest.Key{Group: "apps", Kind: "Deployment", Namespace: testNS, Name: "controller"})
	live = live.DeepCopy()
	live.SetAnnotations(map[string]string{"applied": "v2"})
	if _, err := f.c.ClientFor("operator").Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(testNS).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.steps(t, v2, 6, nil); err != nil {
		t.Fatal(err)
	}

	// Gone: what only v1 listed and the family installed (owned by the
	// component object, or by nobody). Staying: what v2 lists, untouched;
	// what is annotated to be kept; what another owner also owns.
	for k, want := range map[handofftest.Key]bool{
		cmKey("config"): true, cmKey("kept"): true, cmKey("someone-elses"): true, cmKey("old-secret"): false,
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "config.serving"}:     false,
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "validation.serving"}: true,
	} {
		if got := f.c.Exists(k); got != want {
			t.Errorf("%s exists: %v, want %v", k, got, want)
		}
	}
	for k, was := range before {
		key := handofftest.KeyOf(was)
		now, ok := f.c.Get(key)
		if !ok {
			t.Fatalf("%s, listed by v2, is gone", k)
		}
		if now.GetUID() != was.GetUID() {
			t.Errorf("%s was re-created", k)
		}
		if d := cmp.Diff(was.GetOwnerReferences(), now.GetOwnerReferences()); d != "" {
			t.Errorf("%s: ownerReferences changed (-before +after):\n%s", k, d)
		}
	}
	// The kept object, no longer listed, is released from the component
	// object: deleting the component must not take it. The foreign one
	// keeps both its owners.
	if o, _ := f.c.Get(cmKey("kept")); len(o.GetOwnerReferences()) != 0 {
		t.Errorf("kept ConfigMap still owned: %v", o.GetOwnerReferences())
	}
	if o, _ := f.c.Get(cmKey("someone-elses")); len(o.GetOwnerReferences()) != 2 {
		t.Errorf("foreign ConfigMap's owners changed: %v", o.GetOwnerReferences())
	}
	sets, err := f.exec.Dynamic.Resource(handofftest.SetResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sets.Items {
		names = append(names, s.GetName()+"/"+s.GetLabels()[f.fam.GenerationLabel])
	}
	if len(names) != 1 || !strings.HasSuffix(names[0], "/v2") {
		t.Errorf("sets left: %v, want the v2 set alone", names)
	}
	if len(reads) == 0 {
		t.Error("the probe was never asked")
	}
}

// Without Owners, an object the component object owns is someone else's:
// nothing the family cannot prove it installed is deleted.
func TestLegacyOwnerMustBeNamed(t *testing.T) {
	retiring := handoff.Set{Name: "old", UID: "uid-old"}
	live := ownedByCR(cm("old-secret"))
	it := handoff.Item{Ref: handoff.RefOf(live), Verdict: handoff.Delete}
	opts := handoff.DefaultPruneOptions()
	opts.AnyUnowned = true
	if v, why := handoff.LiveVerdict(it, live, retiring, nil, opts); v != handoff.Skip {
		t.Errorf("owned by an unnamed component object: %s (%s), want Skip", v, why)
	}
	opts.Owners = []types.UID{crUID}
	if v, why := handoff.LiveVerdict(it, live, retiring, nil, opts); v != handoff.Delete {
		t.Errorf("owned by the named component object: %s (%s), want Delete", v, why)
	}
	opts.AnyUnowned = false
	if v, why := handoff.LiveVerdict(it, live, retiring, nil, opts); v != handoff.Skip {
		t.Errorf("a ConfigMap, not a kind installed without an owner: %s (%s), want Skip", v, why)
	}
}

func TestKindSelectorMustBeInTheFamilySelector(t *testing.T) {
	fam := handoff.Family{Resource: handofftest.SetResource, Selector: map[string]string{"a": "1"}, GenerationLabel: "g",
		KindSelector: map[string]string{"inventory": "v1"}}
	if err := fam.Validate(); !errors.Is(err, handoff.ErrInvalidFamily) || !strings.Contains(err.Error(), "inventory=v1") {
		t.Errorf("Validate() = %v, want ErrInvalidFamily naming inventory=v1", err)
	}
	fam.Selector["inventory"] = "v1"
	if err := fam.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}
