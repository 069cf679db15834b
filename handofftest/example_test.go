package handofftest_test

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-handoff/handoff/handofftest"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func configMap(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": "demo"},
	}}
}

func ExampleCluster() {
	ctx := context.Background()
	c := handofftest.NewCluster()
	cms := c.ClientFor("executor").Resource(configMaps).Namespace("demo")

	created, _ := cms.Create(ctx, configMap("shared"), metav1.CreateOptions{})
	fmt.Println("uid:", created.GetUID(), "generation:", created.GetGeneration(), "resourceVersion:", created.GetResourceVersion())
	_ = cms.Delete(ctx, "shared", metav1.DeleteOptions{})
	_, _ = cms.Create(ctx, configMap("shared"), metav1.CreateOptions{})

	for _, w := range c.Writes() {
		fmt.Println(w)
	}
	for _, iv := range c.Timeline(handofftest.Key{Kind: "ConfigMap", Namespace: "demo", Name: "shared"}) {
		if iv.To.IsZero() {
			fmt.Println("exists since", iv.From.Format("15:04:05"))
			continue
		}
		fmt.Println("existed from", iv.From.Format("15:04:05"), "to", iv.To.Format("15:04:05"))
	}
	// Output:
	// uid: 00000000-0000-0000-0000-000000000001 generation: 1 resourceVersion: 1
	// 2025-01-01T00:00:01Z executor create ConfigMap demo/shared: created rv=1
	// 2025-01-01T00:00:02Z executor delete ConfigMap demo/shared: removed rv=2
	// 2025-01-01T00:00:03Z executor create ConfigMap demo/shared: created rv=3
	// existed from 00:00:01 to 00:00:02
	// exists since 00:00:03
}

func ExampleFailNth() {
	ctx := context.Background()
	c := handofftest.NewCluster()
	// The executor's first call takes effect, but its response is lost.
	c.InjectFaults(handofftest.FailNth(1, handofftest.AfterCommit, apierrors.NewTimeoutError("response lost", 0)), "executor")
	cms := c.ClientFor("executor").Resource(configMaps).Namespace("demo")

	_, err := cms.Create(ctx, configMap("a"), metav1.CreateOptions{})
	fmt.Println("first create:", err)
	_, err = cms.Create(ctx, configMap("a"), metav1.CreateOptions{})
	fmt.Println("retry:", err)
	// Output:
	// first create: Timeout: response lost
	// retry: configmaps "a" already exists
}
