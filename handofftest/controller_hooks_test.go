package handofftest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SetController.Finalize replaces the executor's Finalize for a set being
// deleted and gets the family as the pass sees it; what it returns decides
// whether the finalizer goes.
func TestSetControllerFinalizeHook(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	d := w.Desire("v1", []string{"static"}, map[string][]*unstructured.Unstructured{
		"static": {handofftest.Object("v1", "ConfigMap", "ns", "config", nil, nil)},
	})
	if _, err := w.Converge(ctx, d, 20); err != nil {
		t.Fatal(err)
	}
	var calls []string
	var seen int
	fail := true
	w.Controller.Finalize = func(ctx context.Context, set *unstructured.Unstructured, family []handoff.Set) (handoff.FinalizeResult, error) {
		calls = append(calls, set.GetName())
		seen = len(family)
		if fail {
			return handoff.FinalizeResult{}, context.Canceled
		}
		return w.Controller.Executor.Finalize(ctx, set)
	}
	if _, err := w.Executor.Step(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Controller.Reconcile(ctx); err == nil {
		t.Error("Reconcile: the hook's error is not returned")
	}
	if len(calls) != 1 || seen != 1 {
		t.Fatalf("hook called for %v with a family of %d sets, want once with 1", calls, seen)
	}
	if n := len(setsOf(w)); n != 1 {
		t.Fatalf("%d sets after a failed finalizer, want the set kept", n)
	}
	fail = false
	if err := w.Controller.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(setsOf(w)); n != 0 {
		t.Errorf("%d sets after the hook succeeded, want none", n)
	}
	if w.Cluster.Exists(handofftest.Key{Kind: "ConfigMap", Namespace: "ns", Name: "config"}) {
		t.Error("the set's ConfigMap is still there after its finalizer ran")
	}
}

// With SkipNotServed a set listing a kind the cluster does not serve is
// applied but for that resource, and gets Ready; without, its pass fails.
func TestSetControllerSkipNotServed(t *testing.T) {
	ctx := context.Background()
	for name, skip := range map[string]bool{"skipped": true, "not skipped": false} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			w.Controller.ReadyAfter = 1
			w.Controller.SkipNotServed = skip
			d := w.Desire("v1", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {
				handofftest.Object("cert-manager.io/v1", "Certificate", "ns", "cert", nil, nil),
				handofftest.Object("v1", "ConfigMap", "ns", "config", nil, nil),
			}})
			if _, err := w.Executor.Step(ctx, d); err != nil {
				t.Fatal(err)
			}
			err := w.Controller.Reconcile(ctx)
			if (err == nil) != skip {
				t.Errorf("Reconcile: %v", err)
			}
			if got := w.Cluster.Exists(handofftest.Key{Kind: "ConfigMap", Namespace: "ns", Name: "config"}); got != skip {
				t.Errorf("ConfigMap after the served kind: exists %v, want %v", got, skip)
			}
			if got := readiness(t, w)["static"] == handoff.Ready; got != skip {
				t.Errorf("Ready %v, want %v", got, skip)
			}
			// Once the kind is served, the next pass applies it.
			w.Cluster.Register(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}, "Certificate", true)
			_ = w.Controller.Reconcile(ctx)
			if !w.Cluster.Exists(handofftest.Key{Group: "cert-manager.io", Kind: "Certificate", Namespace: "ns", Name: "cert"}) {
				t.Error("the Certificate is not applied once its kind is served")
			}
		})
	}
}

func setsOf(w *handofftest.World) []*unstructured.Unstructured {
	list, _ := w.Cluster.Dynamic().Resource(handofftest.SetResource).List(context.Background(), metav1.ListOptions{})
	var out []*unstructured.Unstructured
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

// With OtherFamilies the controller leaves alone an object that a live set
// of another family wrote last; without, it takes it over as one written
// by a set older than its own that its view does not hold.
func TestSetControllerOtherFamilies(t *testing.T) {
	ctx := context.Background()
	hook := handofftest.Object("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "shared.webhook.example.com", nil,
		map[string]any{"webhooks": []any{"shared"}})
	for name, other := range map[string]bool{"other families known": true, "other families unknown": false} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			w.Controller.ReadyAfter = 1
			w.Controller.OtherFamilies = other
			// The other component's set, and the webhook it wrote, first.
			tw := handofftest.NewWorld("TektonTrigger")
			tw.Cluster = w.Cluster
			tw.Executor.Dynamic = w.Cluster.ClientFor("executor")
			tw.Controller.Client = w.Cluster.ClientFor("triggers")
			tw.Controller.Executor.Dynamic = tw.Controller.Client
			tw.Controller.Mapper = w.Cluster.Mapper()
			tw.Executor.Mapper = w.Cluster.Mapper()
			tw.Controller.ReadyAfter = 1
			fam := tw.Family
			fam.NamePrefix = "trigger-main-"
			tw.SetFamily(fam)
			td := tw.Desire("v1", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {hook.DeepCopy()}})
			if _, err := tw.Executor.Step(ctx, td); err != nil {
				t.Fatal(err)
			}
			if err := tw.Controller.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			d := w.Desire("v1", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {hook.DeepCopy()}})
			if _, err := w.Executor.Step(ctx, d); err != nil {
				t.Fatal(err)
			}
			if err := w.Controller.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			live, _ := w.Cluster.Get(handofftest.Key{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "shared.webhook.example.com"})
			var mine bool
			for _, s := range setsOf(w) {
				if s.GetLabels()["operator.tekton.dev/created-by"] == "TektonPipeline" {
					mine = strings.HasPrefix(live.GetAnnotations()[handoff.WriterAnnotation], string(s.GetUID())+"@")
				}
			}
			if mine == other {
				t.Errorf("webhook written by %s; taken over by the pipelines set: %v, want %v",
					live.GetAnnotations()[handoff.WriterAnnotation], mine, !other)
			}
		})
	}
}
