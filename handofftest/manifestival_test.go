package handofftest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	mf "github.com/manifestival/manifestival"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func hpa(version string) *unstructured.Unstructured {
	return handofftest.Object("autoscaling/"+version, "HorizontalPodAutoscaler", "ns", "hpa", nil, nil)
}

// The client maps each object at its own version: a version the cluster
// serves reaches the object, one it does not is a NoMatch error, an empty
// one gets the preferred version.
func TestManifestivalClient(t *testing.T) {
	c := handofftest.NewCluster()
	v2beta2 := schema.GroupVersionResource{Group: "autoscaling", Version: "v2beta2", Resource: "horizontalpodautoscalers"}
	if err := c.AddVersion(v2beta2); err != nil {
		t.Fatal(err)
	}
	mc := handofftest.ManifestivalClient(c.ClientFor("mf"), c.Mapper())
	if err := mc.Create(hpa("v2beta2")); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v2", "v2beta2"} {
		got, err := mc.Get(hpa(v))
		if err != nil || got.GetAPIVersion() != "autoscaling/"+v {
			t.Errorf("get at %s: %v, %v", v, got, err)
		}
	}
	if got, err := mc.Get(handofftest.Object("autoscaling/", "HorizontalPodAutoscaler", "ns", "hpa", nil, nil)); err != nil || got.GetAPIVersion() != "autoscaling/v2" {
		t.Errorf("get without a version: %v, %v; want the preferred v2", got, err)
	}
	live, err := mc.Get(hpa("v2"))
	if err != nil {
		t.Fatal(err)
	}
	live.SetLabels(map[string]string{"a": "b"})
	if err := mc.Update(live); err != nil {
		t.Errorf("update: %v", err)
	}

	c.Unregister(v2beta2)
	if _, err := mc.Get(hpa("v2beta2")); !meta.IsNoMatchError(err) {
		t.Errorf("get at a version no longer served: %v, want NoMatch", err)
	}
	if err := mc.Delete(hpa("v2beta2")); !meta.IsNoMatchError(err) {
		t.Errorf("delete at a version no longer served: %v, want NoMatch", err)
	}

	wrong := types.UID("not-its-uid")
	if err := mc.Delete(hpa("v2"), mf.Preconditions(metav1.Preconditions{UID: &wrong})); !apierrors.IsConflict(err) {
		t.Errorf("delete with another UID: %v, want Conflict", err)
	}
	if err := mc.Delete(hpa("v2")); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := mc.Delete(hpa("v2")); err != nil {
		t.Errorf("delete of a missing object ignores NotFound by default: %v", err)
	}
	if err := mc.Delete(hpa("v2"), mf.IgnoreNotFound(false)); !apierrors.IsNotFound(err) {
		t.Errorf("delete of a missing object with IgnoreNotFound(false): %v, want NotFound", err)
	}
}

// handoff.ManifestivalObjects works over the client.
func TestManifestivalClientObjects(t *testing.T) {
	c := handofftest.NewCluster()
	mc := handofftest.ManifestivalClient(c.ClientFor("mf"), c.Mapper())
	if err := mc.Create(hpa("v2")); err != nil {
		t.Fatal(err)
	}
	objs := handoff.ManifestivalObjects{Client: mc, NotServed: meta.IsNoMatchError}
	ref := handoff.Ref{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "hpa"}
	live, err := objs.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := objs.Delete(context.Background(), ref, live.GetUID(), metav1.DeletePropagationBackground); err != nil {
		t.Errorf("delete: %v", err)
	}
	_, err = objs.Get(context.Background(), handoff.Ref{Group: "example.com", Kind: "Widget", Name: "w"})
	if !errors.Is(err, handoff.ErrNotServed) {
		t.Errorf("get of a kind not served: %v, want ErrNotServed", err)
	}
}
