// Package tektonfixture holds fixtures shaped like tektoncd/operator's
// components, for tests and demonstrations built on package handofftest:
// the manifests of a pipelines-like component by role, and the kinds its
// set controller installs without an ownerReference.
package tektonfixture

import (
	"fmt"

	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pipelines returns the manifests of a component shaped like tektoncd
// pipelines, by role: "static" holds CRDs, a Namespace, ConfigMaps, RBAC,
// admission webhooks and an APIService; "deployment" holds Deployments,
// Services, an HPA and a PDB. Content depends on the generation, and each
// generation also holds one ConfigMap of its own
// (config-only-<generation>), so an upgrade has shared, obsolete and new
// resources. Every other resource is shared between generations.
func Pipelines(namespace, generation string) map[string][]*unstructured.Unstructured {
	lbls := map[string]string{"app.kubernetes.io/part-of": "tekton-pipelines", "app.kubernetes.io/version": generation}
	obj := func(apiVersion, kind, ns, name string, body map[string]any) *unstructured.Unstructured {
		return handofftest.Object(apiVersion, kind, ns, name, lbls, body)
	}
	var static, workloads []*unstructured.Unstructured
	add := func(list *[]*unstructured.Unstructured, u *unstructured.Unstructured) { *list = append(*list, u) }
	add(&static, obj("v1", "Namespace", "", namespace, nil))
	for _, crd := range []string{"pipelines", "pipelineruns", "tasks", "taskruns", "customruns"} {
		add(&static, obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd+".tekton.dev",
			map[string]any{"spec": map[string]any{"group": "tekton.dev", "version": generation}}))
	}
	for i := range 20 {
		add(&static, obj("v1", "ConfigMap", namespace, fmt.Sprintf("config-%02d", i),
			map[string]any{"data": map[string]any{"version": generation}}))
	}
	add(&static, obj("v1", "ConfigMap", namespace, "config-only-"+generation, map[string]any{"data": map[string]any{"version": generation}}))
	for _, sa := range []string{"tekton-pipelines-controller", "tekton-pipelines-webhook", "tekton-events-controller"} {
		add(&static, obj("v1", "ServiceAccount", namespace, sa, nil))
	}
	for i := range 6 {
		name := fmt.Sprintf("tekton-pipelines-role-%d", i)
		rules := map[string]any{"rules": []any{map[string]any{"apiGroups": []any{"tekton.dev"}, "resources": []any{"*"}, "verbs": []any{"get", generation}}}}
		add(&static, obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", name, rules))
		add(&static, obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", name, map[string]any{"roleRef": map[string]any{"kind": "ClusterRole", "name": name}}))
	}
	for i := range 3 {
		name := fmt.Sprintf("tekton-pipelines-ns-role-%d", i)
		add(&static, obj("rbac.authorization.k8s.io/v1", "Role", namespace, name, map[string]any{"rules": []any{}}))
		add(&static, obj("rbac.authorization.k8s.io/v1", "RoleBinding", namespace, name, map[string]any{"roleRef": map[string]any{"kind": "Role", "name": name}}))
	}
	hook := map[string]any{"webhooks": []any{map[string]any{"name": "webhook.pipeline.tekton.dev", "sideEffects": "None",
		"clientConfig": map[string]any{"service": map[string]any{"name": "tekton-pipelines-webhook", "namespace": namespace}}}}}
	add(&static, obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.webhook.pipeline.tekton.dev", hook))
	add(&static, obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", "webhook.pipeline.tekton.dev", hook))
	add(&static, obj("apiregistration.k8s.io/v1", "APIService", "", "v1beta1.custom.metrics.k8s.io",
		map[string]any{"spec": map[string]any{"service": map[string]any{"name": "tekton-pipelines-webhook", "namespace": namespace}, "version": generation}}))
	for _, d := range []string{"tekton-pipelines-controller", "tekton-pipelines-webhook", "tekton-events-controller", "tekton-pipelines-remote-resolvers"} {
		add(&workloads, obj("apps/v1", "Deployment", namespace, d, map[string]any{"spec": map[string]any{"replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "ghcr.io/tektoncd/" + d + ":" + generation}}}}}}))
		add(&workloads, obj("v1", "Service", namespace, d, map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(9090)}}}}))
	}
	add(&workloads, obj("autoscaling/v2", "HorizontalPodAutoscaler", namespace, "tekton-pipelines-webhook", map[string]any{"spec": map[string]any{"maxReplicas": int64(5)}}))
	add(&workloads, obj("policy/v1", "PodDisruptionBudget", namespace, "tekton-pipelines-webhook", map[string]any{"spec": map[string]any{"minAvailable": int64(1)}}))
	return map[string][]*unstructured.Unstructured{"static": static, "deployment": workloads}
}

// Unowned returns the kinds tektoncd/operator's TektonInstallerSet
// reconciler installs without an ownerReference (its injectOwner
// transformer): CustomResourceDefinitions, Namespaces and admission webhook
// configurations. Set it as handofftest.SetController.Unowned to own resources the
// way it does.
func Unowned() []schema.GroupKind {
	return []schema.GroupKind{
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
		{Kind: "Namespace"},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
	}
}
