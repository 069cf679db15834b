package tektonfixture_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest/tektonfixture"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Two generations share every resource but the ConfigMap each has of its
// own, so an upgrade between them has shared, obsolete and new resources.
func TestPipelinesShareAllButOneConfigMap(t *testing.T) {
	refs := func(gen string) map[handoff.Ref]string {
		out := map[handoff.Ref]string{}
		for role, objs := range tektonfixture.Pipelines("tekton-pipelines", gen) {
			for _, o := range objs {
				r := handoff.RefOf(o)
				if prev, dup := out[r]; dup {
					t.Fatalf("generation %s: %v in roles %s and %s", gen, r, prev, role)
				}
				out[r] = role
			}
		}
		return out
	}
	v1, v2 := refs("v1"), refs("v2")
	var only1, only2 []string
	for r := range v1 {
		if _, ok := v2[r]; !ok {
			only1 = append(only1, r.String())
		}
	}
	for r := range v2 {
		if _, ok := v1[r]; !ok {
			only2 = append(only2, r.String())
		}
	}
	if d := cmp.Diff([]string{"ConfigMap tekton-pipelines/config-only-v1"}, only1); d != "" {
		t.Errorf("only in v1 (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ConfigMap tekton-pipelines/config-only-v2"}, only2); d != "" {
		t.Errorf("only in v2 (-want +got):\n%s", d)
	}
	for _, role := range []string{"static", "deployment"} {
		if n := len(tektonfixture.Pipelines("ns", "v1")[role]); n == 0 {
			t.Errorf("role %s is empty", role)
		}
	}
}

// tektoncd/operator's set controller leaves CRDs, Namespaces and admission
// webhook configurations without an owner, and owns APIServices.
func TestUnowned(t *testing.T) {
	got := map[schema.GroupKind]bool{}
	for _, gk := range tektonfixture.Unowned() {
		got[gk] = true
	}
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
		{Kind: "Namespace"}: true,
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
		{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
		{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           false,
		{Kind: "PersistentVolumeClaim"}:                                                 false,
	} {
		if got[gk] != want {
			t.Errorf("%v unowned = %v, want %v", gk, got[gk], want)
		}
	}
}
