package main

import (
	"context"
	"slices"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

func TestSplitRoles(t *testing.T) {
	for _, version := range []string{"v1", "v2"} {
		g, err := desired(version)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, r := range g.desired.Roles {
			if len(r.Resources) == 0 {
				t.Errorf("%s: role %s is empty", version, r.Name)
			}
			total += len(r.Resources)
			for _, ref := range r.Resources {
				if ref.Kind == "Deployment" && r.Name != roleWorkloads {
					t.Errorf("%s: %s in role %s, want %s", version, ref, r.Name, roleWorkloads)
				}
				if ref.Kind == "ConfigMap" && ref.Namespace != namespace {
					t.Errorf("%s: %s not put into namespace %s by InjectNamespace", version, ref, namespace)
				}
			}
		}
		m, err := load(version)
		if err != nil {
			t.Fatal(err)
		}
		if total != len(m.Resources()) {
			t.Errorf("%s: roles hold %d resources, the manifest %d", version, total, len(m.Resources()))
		}
	}
}

func TestUpgrade(t *testing.T) {
	tests := map[string]struct {
		faults bool
	}{
		"on a healthy cluster":                    {},
		"with random API faults and lost replies": {faults: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			d, err := newDemo(nil, "v1", "v2")
			if err != nil {
				t.Fatal(err)
			}
			if tc.faults {
				d.rounds = 200
				d.cluster.InjectFaults(handofftest.RandomFaults(7, 0.05), "operator", "bundle-controller")
			}
			s, err := d.upgrade(ctx, "v1", "v2")
			if err != nil {
				t.Fatal(err)
			}
			d.cluster.DisableFaults()
			t.Log("\n" + s.String())

			// I1: no resource both generations list was ever absent.
			if len(s.shared) == 0 {
				t.Fatal("no shared resources: the example proves nothing")
			}
			for _, g := range s.gaps {
				t.Errorf("I1: %s", g)
			}
			// I2, I3: only the v2 Bundles are left, one per role, Ready.
			if err := handofftest.CheckConverged(d.cluster, d.family, d.gens["v2"].desired); err != nil {
				t.Error(err)
			}
			if len(s.sets) != 3 {
				t.Errorf("bundles left: %v, want the 3 of v2", s.sets)
			}
			// The resource v2 dropped is pruned, the new ones exist.
			theme := handofftest.Key{Kind: "ConfigMap", Namespace: namespace, Name: "guestbook-legacy-theme"}
			if len(s.obsolete) != 1 || s.obsolete[0] != theme {
				t.Errorf("obsolete = %v, want only %s", s.obsolete, theme)
			}
			if d.cluster.Exists(theme) {
				t.Errorf("%s was not pruned", theme)
			}
			if s.made != len(s.added) || len(s.added) != 2 {
				t.Errorf("created %d of %d new resources, want 2 of 2", s.made, len(s.added))
			}
			// Shared resources carry v2's content and are owned by a v2 Bundle.
			cfg, ok := d.cluster.Get(handofftest.Key{Kind: "ConfigMap", Namespace: namespace, Name: "guestbook-config"})
			if !ok {
				t.Fatal("guestbook-config is gone")
			}
			if got := cfg.Object["data"].(map[string]any)["pageSize"]; got != "50" {
				t.Errorf("guestbook-config pageSize = %v, want v2's 50", got)
			}
			owners := cfg.GetOwnerReferences()
			want := d.family.SetName("v2", roleConfig)
			if len(owners) != 1 || owners[0].Name != want {
				t.Errorf("guestbook-config owners = %v, want only %s", owners, want)
			}
			// The CRD, installed without an owner, was neither deleted nor
			// given one.
			crd, ok := d.cluster.Get(handofftest.Key{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "entries.guestbook.example.com"})
			if !ok || len(crd.GetOwnerReferences()) != 0 {
				t.Errorf("CRD present %v, owners %v; want present without owners", ok, crd.GetOwnerReferences())
			}
		})
	}
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	d, err := newDemo(nil, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.converge(ctx, "v1", d.rounds); err != nil {
		t.Fatal(err)
	}
	for range d.rounds {
		res, err := d.exec.Step(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.ctrl.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if !res.Requeue {
			break
		}
	}
	if err := handofftest.CheckConverged(d.cluster, d.family, nil); err != nil {
		t.Fatal(err)
	}
	// Everything but the protected kinds (Namespaces, CRDs) is gone.
	protected := handoff.DefaultPruneOptions().Protected
	for _, r := range d.gens["v1"].desired.Roles {
		for _, ref := range r.Resources {
			k := handofftest.Key(ref) // the same identity: GroupKind, namespace, name
			if gone := !d.cluster.Exists(k); gone == slices.Contains(protected, ref.GroupKind()) {
				t.Errorf("%s: gone %v after the component was removed", k, gone)
			}
		}
	}
}

// Once the upgrade has converged, a pass of the Bundle controller finds
// every resource as manifestival last applied it and writes nothing; and a
// field another controller added to a resource survives the pass.
func TestSteadyPassWritesNothing(t *testing.T) {
	ctx := context.Background()
	d, err := newDemo(nil, "v1", "v2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.upgrade(ctx, "v1", "v2"); err != nil {
		t.Fatal(err)
	}
	key := d.gens["v2"].desired.Roles[0].Resources[0]
	var target *unstructured.Unstructured
	for _, o := range d.cluster.Objects() {
		if handoff.RefOf(o) == key {
			target = o
		}
	}
	if target == nil {
		t.Fatalf("%s not installed", key)
	}
	gvr, err := d.cluster.Mapper().RESTMapping(key.GroupKind())
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"annotations":{"other.example.com/note":"kept"}}}`)
	var r dynamic.ResourceInterface = d.cluster.ClientFor("other").Resource(gvr.Resource)
	if key.Namespace != "" {
		r = d.cluster.ClientFor("other").Resource(gvr.Resource).Namespace(key.Namespace)
	}
	if _, err := r.Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	n := len(d.cluster.Writes())
	if err := d.ctrl.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, w := range d.cluster.Writes()[n:] {
		t.Errorf("steady pass wrote: %v", w)
	}
	live, err := r.Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.GetAnnotations()["other.example.com/note"] != "kept" {
		t.Errorf("another controller's annotation on %s was lost: %v", key, live.GetAnnotations())
	}
}
