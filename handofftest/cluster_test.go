package handofftest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var (
	cmGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	depGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	setGVR = schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"}
	t0     = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

// newCluster returns a cluster that also serves TektonInstallerSets.
func newCluster(t *testing.T, opts ...Option) *Cluster {
	t.Helper()
	c := NewCluster(opts...)
	c.Register(setGVR, "TektonInstallerSet", false)
	return c
}

func object(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func configMap(ns, name string) *unstructured.Unstructured {
	u := object("v1", "ConfigMap", ns, name)
	u.Object["data"] = map[string]any{"k": "v"}
	return u
}

func installerSet(name string, finalizers ...string) *unstructured.Unstructured {
	u := object("operator.tekton.dev/v1alpha1", "TektonInstallerSet", "", name)
	u.Object["spec"] = map[string]any{"manifests": []any{}}
	if len(finalizers) > 0 {
		u.SetFinalizers(finalizers)
	}
	return u
}

func ownedBy(u *unstructured.Unstructured, owners ...*unstructured.Unstructured) *unstructured.Unstructured {
	var refs []metav1.OwnerReference
	for _, o := range owners {
		refs = append(refs, metav1.OwnerReference{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(),
			BlockOwnerDeletion: ptr(true),
		})
	}
	u.SetOwnerReferences(refs)
	return u
}

func ptr[T any](v T) *T { return &v }

func create(t *testing.T, ri dynamic.ResourceInterface, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := ri.Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", KeyOf(u), err)
	}
	return out
}

func keyOf(gvr schema.GroupVersionResource, kind, ns, name string) Key {
	return Key{Group: gvr.Group, Kind: kind, Namespace: ns, Name: name}
}

func TestUnregisteredResource(t *testing.T) {
	c := NewCluster()
	_, err := c.Dynamic().Resource(setGVR).Get(context.Background(), "x", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get of an unregistered resource: got %v, want NotFound", err)
	}
}

func TestScope(t *testing.T) {
	c := newCluster(t)
	tests := map[string]struct {
		ri dynamic.ResourceInterface
		u  *unstructured.Unstructured
	}{
		"namespaced resource without namespace":  {c.Dynamic().Resource(cmGVR), configMap("", "a")},
		"cluster-scoped resource with namespace": {c.Dynamic().Resource(setGVR).Namespace("ns"), installerSet("a")},
		"object namespace differs from request":  {c.Dynamic().Resource(cmGVR).Namespace("ns"), configMap("other", "a")},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := tt.ri.Create(context.Background(), tt.u, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
				t.Errorf("got %v, want BadRequest", err)
			}
		})
	}
}

func TestClock(t *testing.T) {
	c := newCluster(t, WithClock(t0, time.Minute))
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %s, want %s", got, t0)
	}
	if got, want := c.Tick(), t0.Add(time.Minute); !got.Equal(want) {
		t.Errorf("Tick() = %s, want %s", got, want)
	}
	cm := create(t, c.Dynamic().Resource(cmGVR).Namespace("ns"), configMap("ns", "a"))
	want := t0.Add(2 * time.Minute)
	if got := cm.GetCreationTimestamp().Time; !got.Equal(want) {
		t.Errorf("creationTimestamp = %s, want %s", got, want)
	}
	// A failing call is a call too.
	_, _ = c.Dynamic().Resource(cmGVR).Namespace("ns").Get(context.Background(), "missing", metav1.GetOptions{})
	if got, want := c.Now(), t0.Add(3*time.Minute); !got.Equal(want) {
		t.Errorf("Now() after two calls = %s, want %s", got, want)
	}
}

func TestAdd(t *testing.T) {
	withStatus := installerSet("ready")
	withStatus.SetUID("set-uid")
	withStatus.SetGeneration(4)
	withStatus.Object["status"] = map[string]any{"observedGeneration": int64(4)}
	deleting := installerSet("deleting", "keep")
	deleting.SetDeletionTimestamp(&metav1.Time{Time: t0})
	deletingNoFinalizer := installerSet("gone")
	deletingNoFinalizer.SetDeletionTimestamp(&metav1.Time{Time: t0})

	tests := map[string]struct {
		obj     *unstructured.Unstructured
		wantErr bool
		check   func(t *testing.T, got *unstructured.Unstructured)
	}{
		"keeps uid, generation and status": {
			obj: withStatus,
			check: func(t *testing.T, got *unstructured.Unstructured) {
				if got.GetUID() != "set-uid" || got.GetGeneration() != 4 {
					t.Errorf("uid, generation = %s, %d; want set-uid, 4", got.GetUID(), got.GetGeneration())
				}
				if og, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); og != 4 {
					t.Errorf("status.observedGeneration = %d, want 4", og)
				}
			},
		},
		"assigns what is missing": {
			obj: configMap("ns", "cm"),
			check: func(t *testing.T, got *unstructured.Unstructured) {
				if got.GetUID() == "" || got.GetGeneration() != 1 || got.GetResourceVersion() == "" {
					t.Errorf("uid, generation, rv = %q, %d, %q", got.GetUID(), got.GetGeneration(), got.GetResourceVersion())
				}
				if ts := got.GetCreationTimestamp(); !ts.Time.Equal(t0.Add(time.Second)) {
					t.Errorf("creationTimestamp = %s", ts)
				}
			},
		},
		"keeps a deletion in progress": {
			obj: deleting,
			check: func(t *testing.T, got *unstructured.Unstructured) {
				if got.GetDeletionTimestamp() == nil {
					t.Error("deletionTimestamp is gone")
				}
			},
		},
		"refuses a deletion without finalizers":         {obj: deletingNoFinalizer, wantErr: true},
		"refuses an unregistered kind":                  {obj: object("example.com/v1", "Widget", "", "w"), wantErr: true},
		"refuses a namespaced object without namespace": {obj: configMap("", "cm"), wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			err := c.Add(tt.obj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Add: err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got, ok := c.Get(KeyOf(tt.obj))
			if !ok {
				t.Fatal("object not stored")
			}
			tt.check(t, got)
			if err := c.Add(tt.obj); err == nil {
				t.Error("adding it again: want an error")
			}
		})
	}
}

func TestAddTakesInts(t *testing.T) {
	c := newCluster(t)
	d := object("apps/v1", "Deployment", "ns", "d")
	d.Object["spec"] = map[string]any{"replicas": 2} // an int, not an int64
	if err := c.Add(d); err != nil {
		t.Fatal(err)
	}
	got, _ := c.Get(KeyOf(d))
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 2 {
		t.Errorf("spec.replicas = %d, want 2", r)
	}
}

func TestKeyString(t *testing.T) {
	tests := map[Key]string{
		{Kind: "ConfigMap", Namespace: "ns", Name: "a"}:                         "ConfigMap ns/a",
		{Group: "operator.tekton.dev", Kind: "TektonInstallerSet", Name: "set"}: "operator.tekton.dev/TektonInstallerSet set",
	}
	for k, want := range tests {
		if got := k.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", k, got, want)
		}
	}
}

func TestRegisterReplaces(t *testing.T) {
	c := newCluster(t)
	v1 := schema.GroupVersionResource{Group: setGVR.Group, Version: "v1", Resource: setGVR.Resource}
	c.Register(v1, "TektonInstallerSet", false)
	if _, err := c.Dynamic().Resource(setGVR).List(context.Background(), metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("list at the replaced version: %v, want NotFound", err)
	}
	got := create(t, c.Dynamic().Resource(v1), installerSet("set"))
	if got.GetAPIVersion() != "operator.tekton.dev/v1" {
		t.Errorf("apiVersion = %s, want operator.tekton.dev/v1", got.GetAPIVersion())
	}
	mapping, err := c.Mapper().RESTMapping(schema.GroupKind{Group: setGVR.Group, Kind: "TektonInstallerSet"})
	if err != nil || mapping.Resource != v1 {
		t.Errorf("mapping = %v, %v; want %s", mapping, err, v1)
	}
}

// NewCluster serves the built-in kinds its doc lists, each at one version
// with its scope, and nothing else.
func TestNewClusterServesTheBuiltinKinds(t *testing.T) {
	type served struct {
		Kind       string
		Resource   string
		Namespaced bool
	}
	want := map[string]served{}
	add := func(gv string, namespaced bool, kinds ...string) {
		for _, k := range kinds {
			// Every built-in kind's plural is its lower-case name and "s".
			want[gv+" "+k] = served{Kind: k, Resource: strings.ToLower(k) + "s", Namespaced: namespaced}
		}
	}
	add("v1", true, "ConfigMap", "Secret", "Service", "ServiceAccount", "PersistentVolumeClaim")
	add("v1", false, "Namespace")
	add("apps/v1", true, "Deployment", "StatefulSet", "DaemonSet")
	add("batch/v1", true, "Job")
	add("rbac.authorization.k8s.io/v1", true, "Role", "RoleBinding")
	add("rbac.authorization.k8s.io/v1", false, "ClusterRole", "ClusterRoleBinding")
	add("admissionregistration.k8s.io/v1", false, "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
	add("apiregistration.k8s.io/v1", false, "APIService")
	add("apiextensions.k8s.io/v1", false, "CustomResourceDefinition")
	add("policy/v1", true, "PodDisruptionBudget")
	add("autoscaling/v2", true, "HorizontalPodAutoscaler")

	c := NewCluster()
	got := map[string]served{}
	for gvr, k := range c.kinds {
		got[gvr.GroupVersion().String()+" "+k.kind] = served{Kind: k.kind, Resource: gvr.Resource, Namespaced: k.namespaced}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("built-in kinds (-want +got):\n%s", d)
	}
	for key, s := range want {
		gv, _ := schema.ParseGroupVersion(strings.Fields(key)[0])
		m, err := c.Mapper().RESTMapping(schema.GroupKind{Group: gv.Group, Kind: s.Kind})
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if ns := m.Scope.Name() == meta.RESTScopeNameNamespace; ns != s.Namespaced || m.Resource.Resource != s.Resource {
			t.Errorf("%s: mapped to %s, namespaced %v", key, m.Resource, ns)
		}
	}
}
