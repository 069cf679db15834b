//go:build e2e

package controlplane_test

import (
	"context"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kube-handoff/handoff/internal/controlplane"
)

// widgetCRD is a small cluster-scoped CRD.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.handoff.example.com
spec:
  group: e2e.handoff.example.com
  scope: Cluster
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    singular: widget
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	widgets    = schema.GroupVersionResource{Group: "e2e.handoff.example.com", Version: "v1alpha1", Resource: "widgets"}
)

func TestControlPlane(t *testing.T) {
	if os.Getenv(controlplane.EnvBinDir) == "" {
		t.Fatalf("$%s is not set: run hack/e2e.sh, or hack/controlplane/build.sh and export its output", controlplane.EnvBinDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	began := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDs: [][]byte{[]byte(widgetCRD)},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	t.Logf("control plane started in %v", time.Since(began).Round(time.Millisecond))

	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("kubeconfig", func(t *testing.T) {
		data, err := os.ReadFile(cp.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			t.Fatal("empty kubeconfig")
		}
	})

	t.Run("CRD servable at once", func(t *testing.T) {
		// No retry: Start promised the resource is served.
		w := object("e2e.handoff.example.com/v1alpha1", "Widget", "", "first")
		if _, err := dyn.Resource(widgets).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create widget: %v", err)
		}
	})

	t.Run("garbage collector", func(t *testing.T) {
		owner, err := dyn.Resource(configMaps).Namespace("default").Create(ctx,
			object("v1", "ConfigMap", "default", "owner"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dependent := object("v1", "ConfigMap", "default", "dependent")
		dependent.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.GetName(), UID: owner.GetUID(),
		}})
		if _, err := dyn.Resource(configMaps).Namespace("default").Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deleteBackground(ctx, t, dyn.Resource(configMaps).Namespace("default"), owner.GetName())
		waitGone(ctx, t, dyn.Resource(configMaps).Namespace("default"), "dependent", 10*time.Second)
	})

	t.Run("garbage collector knows the CRD", func(t *testing.T) {
		// A cluster-scoped custom resource owning a namespaced ConfigMap:
		// collected only if the GC's first discovery included the CRD.
		owner, err := dyn.Resource(widgets).Create(ctx,
			object("e2e.handoff.example.com/v1alpha1", "Widget", "", "owner"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dependent := object("v1", "ConfigMap", "default", "widget-dependent")
		dependent.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: "e2e.handoff.example.com/v1alpha1", Kind: "Widget", Name: owner.GetName(), UID: owner.GetUID(),
		}})
		if _, err := dyn.Resource(configMaps).Namespace("default").Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deleteBackground(ctx, t, dyn.Resource(widgets), owner.GetName())
		waitGone(ctx, t, dyn.Resource(configMaps).Namespace("default"), "widget-dependent", 10*time.Second)
	})

	t.Run("RBAC denies an unprivileged user", func(t *testing.T) {
		cfg, err := cp.UserConfig("alice", "handoff:testers")
		if err != nil {
			t.Fatal(err)
		}
		userDyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = userDyn.Resource(namespaces).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("listing namespaces as alice: got %v, want Forbidden", err)
		}
		// The admin identity may.
		if _, err := dyn.Resource(namespaces).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("listing namespaces as admin: %v", err)
		}
	})

	t.Run("Stop", func(t *testing.T) {
		dir := cp.WorkDir()
		cp.Stop()
		cp.Stop() // idempotent
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("work dir %s still there after Stop: %v", dir, err)
		}
		if _, err := dyn.Resource(namespaces).List(ctx, metav1.ListOptions{}); err == nil {
			t.Fatal("API server still answers after Stop")
		}
	})
}

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func deleteBackground(ctx context.Context, t *testing.T, ri dynamic.ResourceInterface, name string) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	if err := ri.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

func waitGone(ctx context.Context, t *testing.T, ri dynamic.ResourceInterface, name string, within time.Duration) {
	t.Helper()
	began := time.Now()
	for {
		_, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Logf("%s collected %v after its owner's deletion", name, time.Since(began).Round(time.Millisecond))
			return
		}
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		if time.Since(began) > within {
			t.Fatalf("%s still exists %v after its owner was deleted: the garbage collector did not collect it", name, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
