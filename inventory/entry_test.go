package inventory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// obj makes an object of an apiVersion and kind, in ns (empty: none).
func obj(apiVersion, kind, ns, name string) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// configMap makes an inventory ConfigMap with the given data.
func configMap(data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}}
}

func TestEntriesRoundTrip(t *testing.T) {
	objs := []unstructured.Unstructured{
		obj("apps/v1", "Deployment", "knative-serving", "controller"),
		obj("v1", "ConfigMap", "knative-serving", "config-network"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "knative-serving-admin"),
		obj("networking.internal.knative.dev/v1alpha1", "Certificate", "knative-serving", "routing-serving-certs"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "services.serving.knative.dev"),
		obj("v1", "Namespace", "", "knative-serving"),
		// RBAC names are not DNS names: an underscore in one is read back
		// as part of the name.
		obj("rbac.authorization.k8s.io/v1", "Role", "knative-serving", "odd_name_x"),
	}
	wantData := map[string]any{
		"knative-serving_controller_apps_Deployment":                                        "apps/v1",
		"knative-serving_config-network__ConfigMap":                                         "v1",
		"_knative-serving-admin_rbac.authorization.k8s.io_ClusterRole":                      "rbac.authorization.k8s.io/v1",
		"knative-serving_routing-serving-certs_networking.internal.knative.dev_Certificate": "networking.internal.knative.dev/v1alpha1",
		"_services.serving.knative.dev_apiextensions.k8s.io_CustomResourceDefinition":       "apiextensions.k8s.io/v1",
		"_knative-serving__Namespace":                                                       "v1",
		"knative-serving_odd_name_x_rbac.authorization.k8s.io_Role":                         "rbac.authorization.k8s.io/v1",
	}
	// Sorted by data key ("-" sorts before "_").
	want := []inventory.Entry{
		{Ref: handoff.Ref{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "knative-serving-admin"}, APIVersion: "rbac.authorization.k8s.io/v1"},
		{Ref: handoff.Ref{Kind: "Namespace", Name: "knative-serving"}, APIVersion: "v1"},
		{Ref: handoff.Ref{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "services.serving.knative.dev"}, APIVersion: "apiextensions.k8s.io/v1"},
		{Ref: handoff.Ref{Kind: "ConfigMap", Namespace: "knative-serving", Name: "config-network"}, APIVersion: "v1"},
		{Ref: handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: "knative-serving", Name: "controller"}, APIVersion: "apps/v1"},
		{Ref: handoff.Ref{Group: "rbac.authorization.k8s.io", Kind: "Role", Namespace: "knative-serving", Name: "odd_name_x"}, APIVersion: "rbac.authorization.k8s.io/v1"},
		{Ref: handoff.Ref{Group: "networking.internal.knative.dev", Kind: "Certificate", Namespace: "knative-serving", Name: "routing-serving-certs"}, APIVersion: "networking.internal.knative.dev/v1alpha1"},
	}

	got, err := inventory.Entries(objs)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Entries (-want +got):\n%s", d)
	}
	data := map[string]any{}
	for _, e := range got {
		data[e.Key()] = e.APIVersion
	}
	if d := cmp.Diff(wantData, data); d != "" {
		t.Errorf("data (-want +got):\n%s", d)
	}
	back, err := inventory.Decode(configMap(wantData))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, back); d != "" {
		t.Errorf("Decode (-want +got):\n%s", d)
	}
}

func TestDecodeMalformed(t *testing.T) {
	good := inventory.Entry{Ref: handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "d"}, APIVersion: "apps/v1"}
	tests := map[string]struct {
		key string
		val any
	}{
		"a key without separators":          {key: "nonsense", val: "v1"},
		"a key with two fields":             {key: "ns_name", val: "v1"},
		"a key with three fields":           {key: "ns_name_Kind", val: "v1"},
		"a key with no name":                {key: "ns___ConfigMap", val: "v1"},
		"a key with no kind":                {key: "ns_name_apps_", val: "apps/v1"},
		"a value that is not a string":      {key: "ns_name__ConfigMap", val: int64(1)},
		"a value that is no apiVersion":     {key: "ns_name__ConfigMap", val: "a/b/c"},
		"a value with no version":           {key: "ns_name__ConfigMap", val: ""},
		"a value of another group than key": {key: "ns_name_apps_Deployment", val: "batch/v1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := inventory.Decode(configMap(map[string]any{good.Key(): "apps/v1", tc.key: tc.val}))
			var ke *inventory.KeyError
			if !errors.As(err, &ke) || ke.Key != tc.key || !errors.Is(err, inventory.ErrInvalidInventory) {
				t.Fatalf("Decode error = %v, want a KeyError for %q wrapping ErrInvalidInventory", err, tc.key)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q does not name the key %q", err, tc.key)
			}
			if d := cmp.Diff([]inventory.Entry{good}, got); d != "" {
				t.Errorf("entries read despite the error (-want +got):\n%s", d)
			}
		})
	}
}

func TestDecodeNotAMap(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"data": "x"}}
	if _, err := inventory.Decode(cm); !errors.Is(err, inventory.ErrInvalidInventory) {
		t.Errorf("Decode of string data = %v, want ErrInvalidInventory", err)
	}
	got, err := inventory.Decode(&unstructured.Unstructured{Object: map[string]any{}})
	if err != nil || len(got) != 0 {
		t.Errorf("Decode of no data = %v, %v; want nothing", got, err)
	}
}

func TestEntriesRejectInvalidObjects(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := map[string]struct {
		objs  []unstructured.Unstructured
		index []int  // the objects the error names, in order
		says  string // a part of the message
	}{
		"an object without kind": {
			objs: []unstructured.Unstructured{obj("v1", "ConfigMap", "ns", "ok"), obj("v1", "", "ns", "nokind")}, index: []int{1}, says: "no kind",
		},
		"an object without name": {
			objs: []unstructured.Unstructured{obj("apps/v1", "Deployment", "ns", "")}, index: []int{0}, says: "no name",
		},
		"an object without apiVersion": {
			objs: []unstructured.Unstructured{obj("", "ConfigMap", "ns", "x")}, index: []int{0}, says: "no API version",
		},
		"a name with a colon": {
			objs: []unstructured.Unstructured{obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "system:knative")}, index: []int{0}, says: "data key",
		},
		"a key longer than 253": {
			objs: []unstructured.Unstructured{obj("v1", "ConfigMap", "ns", long)}, index: []int{0}, says: "data key",
		},
		"a kind with the separator": {
			objs: []unstructured.Unstructured{obj("example.com/v1", "My_Kind", "ns", "x")}, index: []int{0}, says: `kind "My_Kind"`,
		},
		"the same object at two versions": {
			objs: []unstructured.Unstructured{
				obj("autoscaling/v2beta2", "HorizontalPodAutoscaler", "ns", "h"), obj("v1", "ConfigMap", "ns", "a"), obj("autoscaling/v2", "HorizontalPodAutoscaler", "ns", "h"),
			}, index: []int{2}, says: "same object as object 0, at API version autoscaling/v2beta2",
		},
		"two bad objects": {
			objs: []unstructured.Unstructured{obj("v1", "", "ns", "a"), obj("v1", "ConfigMap", "ns", "b"), obj("v1", "Secret", "ns", "")}, index: []int{0, 2}, says: "no",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := inventory.Entries(tc.objs)
			if got != nil {
				t.Errorf("Entries returned %v with an error", got)
			}
			if !errors.Is(err, inventory.ErrInvalidInventory) {
				t.Fatalf("Entries error = %v, want ErrInvalidInventory", err)
			}
			var index []int
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var oe *inventory.ObjectError
				if !errors.As(e, &oe) {
					t.Fatalf("error %v is no ObjectError", e)
				}
				index = append(index, oe.Index)
				if want := handoff.RefOf(&tc.objs[oe.Index]); oe.Ref != want || !strings.Contains(e.Error(), want.String()) {
					t.Errorf("error %q names %v, want %v", e, oe.Ref, want)
				}
			}
			if d := cmp.Diff(tc.index, index); d != "" {
				t.Errorf("objects named (-want +got):\n%s", d)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
		})
	}
}

func TestVersions(t *testing.T) {
	newer := []inventory.Entry{
		{Ref: handoff.Ref{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "a"}, APIVersion: "autoscaling/v2"},
		{Ref: handoff.Ref{Kind: "ConfigMap", Namespace: "ns", Name: "c"}, APIVersion: "v1"},
	}
	older := []inventory.Entry{
		{Ref: handoff.Ref{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "a"}, APIVersion: "autoscaling/v2beta2"},
		{Ref: handoff.Ref{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "b"}, APIVersion: "autoscaling/v2"},
	}
	v := inventory.Versions(newer, older)
	for gk, want := range map[schema.GroupKind][]string{
		{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: {"v2", "v2beta2"},
		{Kind: "ConfigMap"}:                 {"v1"},
		{Group: "apps", Kind: "Deployment"}: nil,
	} {
		if d := cmp.Diff(want, v(gk)); d != "" {
			t.Errorf("%v (-want +got):\n%s", gk, d)
		}
	}
}

// An inventory with a malformed entry is an invalid set that still lists
// what could be read, so no other set's retirement deletes it.
func TestObserveMalformed(t *testing.T) {
	inv := inventory.Inventory{Namespace: "ops", Component: "c"}
	cm := configMap(map[string]any{"ns_a__ConfigMap": "v1", "garbage": "v1"})
	cm.SetName("c-inventory-part-0-3bfc269594")
	cm.SetLabels(map[string]string{
		inventory.ComponentLabel: "c", inventory.SetKindLabel: inventory.SetKind,
		inventory.GenerationLabel: "v1", handoff.DefaultRoleLabel: "part-0",
	})
	s, err := inv.Family().Observe(cm)
	if !errors.Is(err, handoff.ErrInvalidSet) || !errors.Is(err, inventory.ErrInvalidInventory) || !strings.Contains(err.Error(), `"garbage"`) {
		t.Errorf("Observe error = %v, want ErrInvalidSet and ErrInvalidInventory naming the key", err)
	}
	if d := cmp.Diff([]handoff.Ref{{Kind: "ConfigMap", Namespace: "ns", Name: "a"}}, s.Resources); d != "" {
		t.Errorf("resources of the invalid set (-want +got):\n%s", d)
	}
}

// An object listed twice at the same API version, as knative's releases
// list their CRDs, is recorded once; entries sort by data key, and a
// cluster-scoped object's key begins with the empty namespace.
func TestEntriesRecordARepeatOnce(t *testing.T) {
	crd := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "images.caching.internal.knative.dev")
	got, err := inventory.Entries([]unstructured.Unstructured{crd, obj("v1", "ConfigMap", "ns", "a"), crd})
	if err != nil {
		t.Fatal(err)
	}
	want := []inventory.Entry{
		{Ref: handoff.Ref{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "images.caching.internal.knative.dev"}, APIVersion: "apiextensions.k8s.io/v1"},
		{Ref: handoff.Ref{Kind: "ConfigMap", Namespace: "ns", Name: "a"}, APIVersion: "v1"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
}
