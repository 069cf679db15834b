package handofftest

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	hpaV2      = schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	hpaV2beta2 = schema.GroupVersionResource{Group: "autoscaling", Version: "v2beta2", Resource: "horizontalpodautoscalers"}
	hpaGK      = schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}
)

// A kind served at two versions: either version reaches the same object,
// which comes back at the version asked for and is stored at the
// preferred one; a mapping without a version gets the preferred one.
func TestAddVersion(t *testing.T) {
	c := newCluster(t)
	if err := c.AddVersion(hpaV2beta2); err != nil {
		t.Fatal(err)
	}
	hpa := object("autoscaling/v2beta2", "HorizontalPodAutoscaler", "ns", "hpa")
	got := create(t, c.Dynamic().Resource(hpaV2beta2).Namespace("ns"), hpa)
	if got.GetAPIVersion() != "autoscaling/v2beta2" {
		t.Errorf("created at v2beta2, returned as %s", got.GetAPIVersion())
	}
	stored, _ := c.Get(Key{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "hpa"})
	if stored.GetAPIVersion() != "autoscaling/v2" {
		t.Errorf("stored as %s, want the preferred autoscaling/v2", stored.GetAPIVersion())
	}
	for _, gvr := range []schema.GroupVersionResource{hpaV2, hpaV2beta2} {
		u, err := c.Dynamic().Resource(gvr).Namespace("ns").Get(context.Background(), "hpa", metav1.GetOptions{})
		if err != nil || u.GetAPIVersion() != gvr.GroupVersion().String() || u.GetUID() != got.GetUID() {
			t.Errorf("get at %s: %v, %v; want the object at that version", gvr.Version, u, err)
		}
		list, err := c.Dynamic().Resource(gvr).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 || list.Items[0].GetAPIVersion() != gvr.GroupVersion().String() {
			t.Errorf("list at %s: %v, %v", gvr.Version, list, err)
		}
	}
	u, err := c.Dynamic().Resource(hpaV2).Namespace("ns").Get(context.Background(), "hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"a": "b"})
	if _, err := c.Dynamic().Resource(hpaV2beta2).Namespace("ns").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update at another version than read: %v", err)
	}
	m := c.Mapper()
	for _, tt := range []struct {
		versions []string
		want     schema.GroupVersionResource
	}{{nil, hpaV2}, {[]string{"v2"}, hpaV2}, {[]string{"v2beta2"}, hpaV2beta2}} {
		mapping, err := m.RESTMapping(hpaGK, tt.versions...)
		if err != nil || mapping.Resource != tt.want {
			t.Errorf("RESTMapping(%v) = %v, %v; want %s", tt.versions, mapping, err, tt.want)
		}
	}
	if err := c.AddVersion(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}); err == nil {
		t.Error("AddVersion of a resource no kind is registered for: want an error")
	}
}

// Unregister stops serving one version; the kind stays served at its
// others, and once none is left it is not served at all until registered
// again, its objects kept meanwhile.
func TestUnregister(t *testing.T) {
	c := newCluster(t)
	if err := c.AddVersion(hpaV2beta2); err != nil {
		t.Fatal(err)
	}
	create(t, c.Dynamic().Resource(hpaV2).Namespace("ns"), object("autoscaling/v2", "HorizontalPodAutoscaler", "ns", "hpa"))
	m := c.Mapper()
	known := func(versions ...string) bool {
		_, err := m.RESTMapping(hpaGK, versions...)
		if err != nil && !meta.IsNoMatchError(err) {
			t.Fatalf("RESTMapping: %v", err)
		}
		return err == nil
	}
	get := func(gvr schema.GroupVersionResource) error {
		_, err := c.Dynamic().Resource(gvr).Namespace("ns").Get(context.Background(), "hpa", metav1.GetOptions{})
		return err
	}

	c.Unregister(hpaV2beta2)
	if got := []bool{known(), known("v2"), known("v2beta2")}; !cmp.Equal(got, []bool{true, true, false}) {
		t.Errorf("after dropping v2beta2, known (any, v2, v2beta2) = %v", got)
	}
	if err := get(hpaV2beta2); !apierrors.IsNotFound(err) {
		t.Errorf("get at the dropped version: %v, want NotFound", err)
	}
	if err := get(hpaV2); err != nil {
		t.Errorf("get at the version still served: %v", err)
	}

	c.Unregister(hpaV2)
	if known() {
		t.Error("after dropping every version the kind is still known")
	}
	if err := get(hpaV2); !apierrors.IsNotFound(err) {
		t.Errorf("get of a kind no longer served: %v, want NotFound", err)
	}
	if !c.Exists(Key{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "hpa"}) {
		t.Error("the object of a kind no longer served is gone from storage")
	}
	c.Unregister(hpaV2) // again: nothing to do

	c.Register(hpaV2beta2, hpaGK.Kind, true)
	if err := get(hpaV2beta2); err != nil {
		t.Errorf("get once the kind is registered again: %v", err)
	}
	if got := []bool{known(), known("v2beta2"), known("v2")}; !cmp.Equal(got, []bool{true, true, false}) {
		t.Errorf("after registering v2beta2 again, known (any, v2beta2, v2) = %v", got)
	}
}

// Registering a kind again replaces every version it was served at.
func TestRegisterReplacesEveryVersion(t *testing.T) {
	c := newCluster(t)
	if err := c.AddVersion(hpaV2beta2); err != nil {
		t.Fatal(err)
	}
	v3 := schema.GroupVersionResource{Group: "autoscaling", Version: "v3", Resource: "horizontalpodautoscalers"}
	c.Register(v3, hpaGK.Kind, true)
	for _, gvr := range []schema.GroupVersionResource{hpaV2, hpaV2beta2} {
		if _, err := c.Dynamic().Resource(gvr).List(context.Background(), metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("list at replaced %s: %v, want NotFound", gvr.Version, err)
		}
	}
	mapping, err := c.Mapper().RESTMapping(hpaGK)
	if err != nil || mapping.Resource != v3 {
		t.Errorf("mapping = %v, %v; want %s", mapping, err, v3)
	}
}
