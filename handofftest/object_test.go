package handofftest_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff/handofftest"
)

func TestObject(t *testing.T) {
	lbls := map[string]string{"app": "x"}
	cm := handofftest.Object("v1", "ConfigMap", "ns", "cfg", lbls, map[string]any{"data": map[string]any{"k": "v"}})
	lbls["app"] = "changed"
	want := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"},
		"metadata": map[string]any{"name": "cfg", "namespace": "ns", "labels": map[string]any{"app": "x"}}}
	if d := cmp.Diff(want, cm.Object); d != "" {
		t.Errorf("namespaced object (-want +got):\n%s", d)
	}
	role := handofftest.Object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r", nil, nil)
	if _, ok := role.Object["metadata"].(map[string]any)["namespace"]; ok {
		t.Errorf("cluster-scoped object got a namespace: %v", role.Object)
	}
}
