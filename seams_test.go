package handoff_test

// Regression tests for the silent losses at the seams (issue 22): a version
// no longer served taken for a kind not served, a long-lived Objects that
// stops learning kinds, a removal reported settled from a lagging cache,
// and an object another family still serves. Each fails on the commit
// before the fix, with every call returning success.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// manifestsOf returns the manifests of seeded objects, as
// handoff.ManifestVersions takes them.
func manifestsOf(objs ...*unstructured.Unstructured) []unstructured.Unstructured {
	out := make([]unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = *o.DeepCopy()
	}
	return out
}

// finalizeAndDelete runs the set's finalizer as a set controller would and
// then lets the set go: the garbage collector takes what it still owns.
func (f *fixture) finalizeAndDelete(t *testing.T, name string) (handoff.FinalizeResult, error) {
	t.Helper()
	set, ok := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: name})
	if !ok {
		t.Fatalf("no set %s", name)
	}
	res, err := f.exec.Finalize(context.Background(), set)
	if err != nil {
		return res, err
	}
	sets := f.c.ClientFor("controller").Resource(handofftest.SetResource)
	if err := sets.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// Item 1: the retiring set lists an HPA at autoscaling/v2beta2, which the
// server no longer serves; its successor lists the same object at
// autoscaling/v2. The object is one object: it is handed over, not lost
// to the garbage collector; and on removal a webhook configuration listed
// at a version no longer served is deleted, not left behind.
func TestVersionNoLongerServedIsNotAKindNotServed(t *testing.T) {
	hpaOld := mkObj("autoscaling/v2beta2", "HorizontalPodAutoscaler", testNS, "web", "")
	hpa := mkObj("autoscaling/v2", "HorizontalPodAutoscaler", testNS, "web", "")
	hookOld := mkObj("admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration", "", "validation.webhook", "")
	hook := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.webhook", "")
	hpaKey := handofftest.Key{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: testNS, Name: "web"}
	hookKey := handofftest.Key{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "validation.webhook"}

	for _, order := range []string{"retiring set's manifests first", "successor's manifests first"} {
		t.Run("handed over at the served version, "+order, func(t *testing.T) {
			f := newFixture(t)
			f.seed(t, []setSpec{
				{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{hpaOld}},
				{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{hpa}},
			}, []*unstructured.Unstructured{hpa}, map[string]string{"web": "static-v1"})
			manifests := [][]unstructured.Unstructured{manifestsOf(hpaOld), manifestsOf(hpa)}
			if order != "retiring set's manifests first" {
				manifests[0], manifests[1] = manifests[1], manifests[0]
			}
			// As the tektoncd/operator patch configures it.
			f.exec.Objects = handoff.ManifestivalObjects{Client: handofftest.ManifestivalClient(f.c.ClientFor("executor"), f.c.Mapper()),
				Versions: handoff.ManifestVersions(manifests...), NotServed: meta.IsNoMatchError}
			res, err := f.finalizeAndDelete(t, "static-v1")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]string{"HorizontalPodAutoscaler.autoscaling comp-ns/web"}, itemRefs(res.HandedOver)); d != "" {
				t.Errorf("handed over (-want +got):\n%s", d)
			}
			owners, ok := f.owners(hpaKey)
			if !ok {
				t.Fatal("the HPA both generations list was deleted with the retiring set")
			}
			if d := cmp.Diff([]string{"static-v2"}, owners); d != "" {
				t.Errorf("HPA owners (-want +got):\n%s", d)
			}
		})
	}

	t.Run("removal deletes a webhook configuration listed at a version no longer served", func(t *testing.T) {
		f := newFixture(t)
		f.seed(t, []setSpec{
			{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{hookOld}},
		}, []*unstructured.Unstructured{hook}, nil)
		f.exec.Objects = handoff.ManifestivalObjects{Client: handofftest.ManifestivalClient(f.c.ClientFor("executor"), f.c.Mapper()),
			Versions: handoff.ManifestVersions(manifestsOf(hookOld)), NotServed: meta.IsNoMatchError}
		res, err := f.finalizeAndDelete(t, "static-v1")
		if err != nil {
			t.Fatal(err)
		}
		if f.c.Exists(hookKey) {
			t.Errorf("the webhook configuration was left behind; skipped: %v, unserved: %v", res.Skipped, res.Unserved)
		}
	})

	t.Run("a kind served at no version is named as unserved, and a lister makes it an error", func(t *testing.T) {
		gadget := mkObj("example.dev/v1", "Gadget", testNS, "g", "")
		f := newFixture(t)
		f.seed(t, []setSpec{
			{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{gadget}},
		}, nil, nil)
		f.exec.Objects = handoff.ManifestivalObjects{Client: handofftest.ManifestivalClient(f.c.ClientFor("executor"), f.c.Mapper()),
			Versions: handoff.ManifestVersions(manifestsOf(gadget)), NotServed: meta.IsNoMatchError}
		set, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: "static-v1"})
		res, err := f.exec.Finalize(context.Background(), set)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"Gadget.example.dev comp-ns/g"}, itemRefs(res.Unserved)); d != "" {
			t.Errorf("unserved (-want +got):\n%s", d)
		}

		f.seed(t, []setSpec{{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{gadget}}}, nil, nil)
		if _, err := f.exec.Finalize(context.Background(), set); !errors.Is(err, handoff.ErrNotServed) {
			t.Errorf("Finalize with a live lister of an unserved kind: error %v, want ErrNotServed", err)
		}
	})
}

func itemRefs(items []handoff.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Ref.String())
	}
	return out
}

// Item 2: one NewDynamicObjects for the life of the operator, over a
// discovery cache. A first Finalize meets a kind nobody serves (the
// mapper is reset, in vain); a CRD is installed later; a second Finalize
// must learn the new kind and hand its object over, and a report must
// never say "handed over" for an object whose owners did not change.
func TestLongLivedObjectsGoOnLearning(t *testing.T) {
	gadget := mkObj("example.dev/v1", "Gadget", testNS, "g", "")
	widget := mkObj("example.dev/v1", "Widget", testNS, "w", "")
	widgetKey := handofftest.Key{Group: "example.dev", Kind: "Widget", Namespace: testNS, Name: "w"}
	f := newFixture(t)
	f.exec.Objects = handoff.NewDynamicObjects(f.c.ClientFor("executor"), f.c.CachedMapper())
	f.exec.Mapper = nil
	f.seed(t, []setSpec{
		{name: "other-v1", gen: "v1", role: "deployment", age: 30, lists: []*unstructured.Unstructured{gadget}},
	}, nil, nil)
	if _, err := f.finalizeAndDelete(t, "other-v1"); err != nil {
		t.Fatal(err)
	}

	f.c.Register(widgets, "Widget", true) // the CRD is installed
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{widget}},
		{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{widget}},
	}, []*unstructured.Unstructured{widget}, map[string]string{"w": "static-v1"})
	res, err := f.finalizeAndDelete(t, "static-v1")
	if err != nil {
		t.Fatal(err)
	}
	owners, ok := f.owners(widgetKey)
	if !ok {
		t.Fatalf("the Widget both generations list was collected with the retiring set; reported handed over: %v", res.HandedOver)
	}
	if d := cmp.Diff([]string{"static-v2"}, owners); d != "" {
		t.Errorf("Widget owners (-want +got):\n%s", d)
	}
}

// Item 3: the executor reads from a cache that has not seen the set it
// created when the component is removed. A removal Step that returns
// settled lets the operator drop its own finalizer: it must not, while the
// API server still holds a set of the family.
func TestRemovalIsNotSettledFromALaggingCache(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("Comp")
	cache := &laggingCache{c: w.Cluster, fam: w.Family, lag: 1}
	cache.snapshot() // the informer has seen nothing yet
	w.Executor.Cache = cache
	if _, err := w.Executor.Step(ctx, w.Desire("v1", staticDeploy, small("v1"))); err != nil {
		t.Fatal(err)
	}
	if len(cache.now()) == 0 {
		t.Fatal("the first Step created no set: the test shows nothing")
	}
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatal("the removal did not settle in 20 Steps")
		}
		res, err := w.Executor.Step(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Requeue {
			if left := cache.now(); len(left) != 0 {
				t.Fatalf("removal reported settled while the API server holds %d sets of the family", len(left))
			}
			break
		}
		// Sets the executor deleted are finalized, as their controller would.
		for _, s := range cache.now() {
			if s.GetDeletionTimestamp() == nil {
				continue
			}
			if _, err := w.Executor.Finalize(ctx, s); err != nil {
				t.Fatal(err)
			}
			s.SetFinalizers(nil)
			if _, err := w.Cluster.Dynamic().Resource(handofftest.SetResource).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Item 4: pipelines and triggers both list one unowned admission webhook;
// the triggers set wrote it last (its writer mark), so its guard keeps
// pipelines' controller from writing it. Removing pipelines must not
// delete it either, and a ConfigMap pipelines' set owns that a live
// triggers set also lists goes to the triggers set, not to the garbage
// collector.
func TestObjectAnotherFamilyServes(t *testing.T) {
	hook := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.shared", "")
	hookKey := handofftest.Key{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "validation.shared"}
	config := cm("shared-config")
	for name, tc := range map[string]struct {
		triggersLists []*unstructured.Unstructured
		wantReason    string
	}{
		"the triggers set lists both":                                {triggersLists: []*unstructured.Unstructured{hook, config}, wantReason: "listed by"},
		"the triggers set lists neither, but wrote the webhook last": {wantReason: "last written by"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			pipelines := f.fam
			triggers := f.fam
			triggers.Selector = map[string]string{"operator.tekton.dev/created-by": "TektonTrigger", "operator.tekton.dev/type": "main"}
			f.seed(t, []setSpec{{name: "pipeline-static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{hook, config}}}, nil, nil)
			f.fam = triggers
			f.seed(t, []setSpec{{name: "trigger-static-v1", gen: "v1", role: "static", age: 10, ready: true, lists: tc.triggersLists}}, nil, nil)
			f.fam = pipelines
			trig, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: "trigger-static-v1"})
			trigSet, _ := triggers.Observe(trig)
			stamped := hook.DeepCopy()
			handoff.NewGuard(trigSet, []handoff.Set{trigSet}).Stamp(stamped)
			f.seed(t, nil, []*unstructured.Unstructured{stamped, config}, map[string]string{"shared-config": "pipeline-static-v1"})

			// The guard of pipelines' set agrees: not its to write.
			pipe, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: "pipeline-static-v1"})
			pipeSet, _ := pipelines.Observe(pipe)
			live, _ := f.c.Get(hookKey)
			if ok, _ := handoff.NewGuard(pipeSet, []handoff.Set{pipeSet}, trigSet).MayWrite(live); ok {
				t.Error("the guard of pipelines' set may write a webhook a live triggers set wrote")
			}

			res, err := f.finalizeAndDelete(t, "pipeline-static-v1")
			if err != nil {
				t.Fatal(err)
			}
			if !f.c.Exists(hookKey) {
				t.Fatalf("removing pipelines deleted the webhook triggers serves; deleted: %v", res.Deleted)
			}
			owners, ok := f.owners(cmKey("shared-config"))
			switch {
			case tc.triggersLists == nil && ok:
				t.Errorf("the ConfigMap only pipelines listed is still there, owned by %v", owners)
			case tc.triggersLists != nil && !ok:
				t.Fatal("the ConfigMap triggers lists was collected with pipelines' set")
			case tc.triggersLists != nil:
				if d := cmp.Diff([]string{"trigger-static-v1"}, owners); d != "" {
					t.Errorf("ConfigMap owners (-want +got):\n%s", d)
				}
			}
			var reasons []string
			for _, it := range append(res.Skipped, res.HandedOver...) {
				reasons = append(reasons, fmt.Sprintf("%s: %s", it.Ref.Name, it.Reason))
			}
			if !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, "validation.shared: "+tc.wantReason) }) {
				t.Errorf("no item says why the webhook stays (%q); got %q", tc.wantReason, reasons)
			}
		})
	}
}

// failingDiscovery serves discovery from a fake, except for the groups
// whose discovery fails, as an aggregated API that is down.
type failingDiscovery struct {
	*fakediscovery.FakeDiscovery
	down map[string]bool
}

func (d failingDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if g, _ := schema.ParseGroupVersion(gv); d.down[g.Group] {
		return nil, fmt.Errorf("the server is currently unable to handle the request (%s)", gv)
	}
	return d.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

// A kind of a group whose discovery failed is unknown, never "not
// served": a client-go DeferredDiscoveryRESTMapper drops such a group's
// kinds without an error, so only discovery can tell. Nothing listed in it
// is deleted or reported gone, the call fails naming the group, and a kind
// of a group discovery does not list at all is not served.
func TestPartialDiscoveryIsNotNotServed(t *testing.T) {
	widget := mkObj("example.dev/v1", "Widget", testNS, "w", "")
	gadget := mkObj("other.dev/v1", "Gadget", testNS, "g", "")
	disco := failingDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true}}},
		{GroupVersion: "example.dev/v1", APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Namespaced: true}}},
	}}}, down: map[string]bool{"example.dev": true}}

	f := newFixture(t)
	f.seed(t, []setSpec{{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{widget, gadget}}}, nil, nil)
	f.exec.Discovery = disco
	set, _ := f.c.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: "static-v1"})
	res, err := f.exec.Finalize(context.Background(), set)
	var de *handoff.DiscoveryError
	if !errors.Is(err, handoff.ErrDiscoveryFailed) || !errors.As(err, &de) || de.Group != "example.dev" {
		t.Fatalf("Finalize error %v, want a *DiscoveryError for example.dev", err)
	}
	if d := cmp.Diff([]string{"example.dev"}, res.Reads.Undiscovered); d != "" {
		t.Errorf("undiscovered groups (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Gadget.other.dev comp-ns/g"}, itemRefs(res.Unserved)); d != "" {
		t.Errorf("unserved (-want +got):\n%s", d)
	}
	for _, it := range append(append(res.Deleted, res.Collected...), res.Skipped...) {
		if it.Ref.Kind == "Widget" {
			t.Errorf("the Widget was reported %s", it)
		}
	}

	// Without a discovery client, the mapper's word is all there is.
	f.exec.Discovery = nil
	if res, err := f.exec.Finalize(context.Background(), set); err != nil || len(res.Unserved) != 2 {
		t.Errorf("without discovery: error %v, unserved %v; want both kinds taken for not served", err, res.Unserved)
	}
}
