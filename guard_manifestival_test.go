package handoff_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	mf "github.com/manifestival/manifestival"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// guarded builds what a set's manifests hold for refs, each object's data
// naming the generation that wrote it; cluster-scoped objects get ns all
// the same, as an operator's target-namespace transformer gives them.
func guarded(gen, ns string, refs ...handoff.Ref) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, r := range refs {
		u := handofftest.Object(schema.GroupVersion{Group: r.Group, Version: "v1"}.String(), r.Kind, ns, r.Name, nil,
			map[string]any{"data": map[string]any{"generation": gen}})
		out = append(out, *u)
	}
	return out
}

// A superseded set's pass through manifestival writes only what its
// successor does not list: the shared ConfigMap and the webhook
// configuration (named under the namespace the manifest gave it) are left
// as the new set wrote them, the old-only ConfigMap is written, and each
// object left alone is reported with the guard's reason.
func TestManifestivalGuardFilterAndStamp(t *testing.T) {
	c := handofftest.NewCluster()
	mfc := handofftest.ManifestivalClient(c.ClientFor("controller"), c.Mapper())
	shared, oldOnly := prCM("config-defaults"), prCM("config-v1-only")
	oldStatic := withObject(prSuperseded(prSet("static-v1", "v1", "static", 1, shared, oldOnly, prHook)))
	newStatic := withObject(prSet("static-v2", "v2", "static", 10, shared, prHook))
	// The new generation wrote the shared objects already.
	for _, u := range guarded("v2", prNS, shared, prHook) {
		m, err := mf.ManifestFrom(mf.Slice([]unstructured.Unstructured{u}), mf.UseClient(mfc))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Apply(); err != nil {
			t.Fatal(err)
		}
	}

	skipped := map[string]string{}
	g := handoff.ManifestivalGuard{Guard: handoff.NewGuard(oldStatic, []handoff.Set{oldStatic, newStatic}),
		Skipped: func(u *unstructured.Unstructured, reason string) { skipped[u.GetKind()+"/"+u.GetName()] = reason }}
	m, err := mf.ManifestFrom(mf.Slice(guarded("v1", prNS, shared, oldOnly, prHook)), mf.UseClient(g.Client(mfc)))
	if err != nil {
		t.Fatal(err)
	}
	m, err = m.Filter(g.MayApply).Transform(g.Stamp)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(); err != nil {
		t.Fatal(err)
	}

	wrote := func(r handoff.Ref) string {
		t.Helper()
		live, ok := c.Get(handofftest.Key{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
		if !ok {
			t.Fatalf("%s is absent", r)
		}
		gen, _, _ := unstructured.NestedString(live.Object, "data", "generation")
		return gen
	}
	got := map[string]string{"shared": wrote(shared), "old-only": wrote(oldOnly), "webhook": wrote(prHook)}
	if d := cmp.Diff(map[string]string{"shared": "v2", "old-only": "v1", "webhook": "v2"}, got); d != "" {
		t.Errorf("the generation each object holds (-want +got):\n%s", d)
	}
	want := map[string]string{
		"ConfigMap/config-defaults": shared.String() + " is claimed by static-v2 of generation v2",
		"ValidatingWebhookConfiguration/validation.webhook.pipeline.tekton.dev": prHook.String() + " is claimed by static-v2 of generation v2",
	}
	if d := cmp.Diff(want, skipped); d != "" {
		t.Errorf("objects left alone (-want +got):\n%s", d)
	}
	live, _ := c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: prNS, Name: oldOnly.Name})
	if live.GetAnnotations()[handoff.WriterAnnotation] == "" {
		t.Errorf("the object written carries no writer stamp: %v", live.GetAnnotations())
	}
}

// The client asks MayWrite of what manifestival reads: a set whose view of
// the family is older than the cluster (it is not superseded there) does
// not update an object a newer set it does not know controls, and still
// creates what is missing.
func TestManifestivalGuardClientRefusesWhatANewerSetWrote(t *testing.T) {
	ctx := context.Background()
	c := handofftest.NewCluster()
	mfc := handofftest.ManifestivalClient(c.ClientFor("controller"), c.Mapper())
	shared, missing := prCM("config-defaults"), prCM("config-new")
	oldStatic := withObject(prSet("static-v1", "v1", "static", 1, shared, missing))
	newer := &metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: "static-v2", UID: "uid-static-v2", Controller: ptr.To(true)}
	taken := guarded("v2", prNS, shared)[0]
	taken.SetOwnerReferences([]metav1.OwnerReference{*newer})
	if _, err := c.ClientFor("test").Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(prNS).Create(ctx, &taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var skipped []string
	g := handoff.ManifestivalGuard{Guard: handoff.NewGuard(oldStatic, []handoff.Set{oldStatic}),
		Skipped: func(u *unstructured.Unstructured, reason string) { skipped = append(skipped, u.GetName()+": "+reason) }}
	m, err := mf.ManifestFrom(mf.Slice(guarded("v1", prNS, shared, missing)), mf.UseClient(g.Client(mfc)))
	if err != nil {
		t.Fatal(err)
	}
	m, err = m.Filter(g.MayApply).Transform(g.Stamp)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(); err != nil {
		t.Fatal(err)
	}
	live, _ := c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: prNS, Name: shared.Name})
	if gen, _, _ := unstructured.NestedString(live.Object, "data", "generation"); gen != "v2" {
		t.Errorf("the object the newer set controls now holds %q, want it left at v2", gen)
	}
	if _, ok := c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: prNS, Name: missing.Name}); !ok {
		t.Errorf("the missing object was not created")
	}
	want := []string{"config-defaults: " + shared.String() + " was written by set static-v2 (uid uid-static-v2), newer than this view of the family"}
	if d := cmp.Diff(want, skipped); d != "" {
		t.Errorf("objects left alone (-want +got):\n%s", d)
	}
}
