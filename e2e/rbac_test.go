//go:build e2e

package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// grant is one RBAC rule: verbs on resources of one API group.
type grant struct {
	group     string
	resources []string
	verbs     []string
}

// The minimal RBAC of docs/contract.md. The executor: list, get, create, update,
// patch, delete on the set resource; get, patch on every kind a set lists.
// Finalize: list on the set resource; get, patch, delete on those kinds.
func executorRules() []grant {
	return append([]grant{{"operator.tekton.dev", []string{"tektoninstallersets"}, []string{"list", "get", "create", "update", "patch", "delete"}}},
		listedKinds("get", "patch")...)
}

func finalizeRules() []grant {
	return append([]grant{{"operator.tekton.dev", []string{"tektoninstallersets"}, []string{"list"}}},
		listedKinds("get", "patch", "delete")...)
}

// listedKinds grants verbs on every kind the component's sets list.
func listedKinds(verbs ...string) []grant {
	return []grant{
		{"", []string{"configmaps", "serviceaccounts", "services"}, verbs},
		{"apps", []string{"deployments"}, verbs},
		{"rbac.authorization.k8s.io", []string{"clusterroles", "clusterrolebindings"}, verbs},
		{"admissionregistration.k8s.io", []string{"validatingwebhookconfigurations"}, verbs},
	}
}

// without returns the rules less verb on resource.
func without(rules []grant, resource, verb string) []grant {
	var out []grant
	for _, g := range rules {
		if !slices.Contains(g.resources, resource) {
			out = append(out, g)
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(g.resources), func(r string) bool { return r == resource })
		if len(rest) > 0 {
			out = append(out, grant{g.group, rest, g.verbs})
		}
		out = append(out, grant{g.group, []string{resource}, slices.DeleteFunc(slices.Clone(g.verbs), func(v string) bool { return v == verb })})
	}
	return out
}

var (
	clusterRoles        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	clusterRoleBindings = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	accessReviews       = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}
)

// bind gives user exactly rules, through a ClusterRole and binding of its
// own, and waits until the authorizer allows the first rule.
func bind(t *testing.T, ctx context.Context, admin dynamic.Interface, user string, rules []grant) {
	t.Helper()
	var rs []any
	for _, g := range rules {
		rs = append(rs, map[string]any{"apiGroups": []any{g.group}, "resources": toAny(g.resources), "verbs": toAny(g.verbs)})
	}
	name := "e2e-rbac-" + user
	role := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": name}, "rules": rs}}
	if live, err := admin.Resource(clusterRoles).Get(ctx, name, metav1.GetOptions{}); err == nil {
		role.SetResourceVersion(live.GetResourceVersion())
		_, err = admin.Resource(clusterRoles).Update(ctx, role, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if _, err := admin.Resource(clusterRoles).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}}}}
	if _, err := admin.Resource(clusterRoleBindings).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	first := rules[0]
	waitAccess(t, ctx, admin, user, first.group, first.resources[0], first.verbs[0], true)
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// waitAccess waits until the authorizer answers want for user's verb on
// resource (it reads RBAC from an informer, so a change takes a moment).
func waitAccess(t *testing.T, ctx context.Context, admin dynamic.Interface, user, group, resource, verb string, want bool) {
	t.Helper()
	review := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{"user": user, "resourceAttributes": map[string]any{"group": group, "resource": resource, "verb": verb}}}}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got, err := admin.Resource(accessReviews).Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if allowed, _, _ := unstructured.NestedBool(got.Object, "status", "allowed"); allowed == want {
			return
		}
	}
	t.Fatalf("RBAC: %s %s %s.%s is not %v after 10s", user, verb, resource, group, want)
}

func userClient(t *testing.T, user string) dynamic.Interface {
	t.Helper()
	cfg, err := cp.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// withObsoleteWebhook adds a webhook configuration that only this generation
// lists. The set controller installs it without an ownerReference, as
// tektoncd/operator does, so the garbage collector never removes it: only
// Finalize does.
func withObsoleteWebhook(gen string) func(map[string][]*unstructured.Unstructured) {
	return func(ms map[string][]*unstructured.Unstructured) {
		w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration"}}
		w.SetName("e2e-rbac-only-" + gen)
		ms["static"] = append(ms["static"], w)
	}
}

// Scenario 7: the executor and Finalize under unprivileged identities bound
// to the minimal RBAC of docs/contract.md upgrade (and update in place) as the admin
// does; with a verb less they fail with a Forbidden error naming the object
// and delete nothing, and finish once the verb is granted.
func TestMinimalRBAC(t *testing.T) {
	ctx := context.Background()
	mon := monitorFor(t)
	e := newEnv(t, "rbac", "")
	const execUser, finUser = "e2e-executor", "e2e-finalizer"
	bind(t, ctx, e.dyn, execUser, executorRules())
	bind(t, ctx, e.dyn, finUser, finalizeRules())
	e.exec = e.executor(userClient(t, execUser))
	e.ctrl.Executor = e.executor(userClient(t, finUser))

	t.Run("the minimal RBAC suffices", func(t *testing.T) {
		e.t = t
		e.converge(ctx, e.desire("v1", withObsoleteWebhook("v1")))
		began := time.Now()
		v2 := e.desire("v2")
		e.converge(ctx, v2)
		e.checkEnd(ctx, "v1", "v2")
		if _, err := e.get(ctx, withObsolete(t, e, "v1")); !apierrors.IsNotFound(err) {
			t.Errorf("v1's own webhook configuration: want NotFound, got %v", err)
		}
		_, keys := e.shared("v1", "v2")
		if deleted, _ := mon.stats(keys, began); len(deleted) != 0 {
			t.Errorf("I1: shared resources deleted: %v", deleted)
		}
		// An update in place needs update on sets.
		for i := range v2.Roles {
			v2.Roles[i].Hash = "rehashed"
		}
		e.converge(ctx, v2)
		sets, err := e.sets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sets {
			if s.Hash != "rehashed" {
				t.Errorf("set %s has hash %q after the update in place", s.Name, s.Hash)
			}
		}
	})

	t.Run("without patch on sets the executor changes nothing", func(t *testing.T) {
		e.t = t
		bind(t, ctx, e.dyn, execUser, without(executorRules(), "tektoninstallersets", "patch"))
		waitAccess(t, ctx, e.dyn, execUser, "operator.tekton.dev", "tektoninstallersets", "patch", false)
		before := takeSnapshot(t, ctx, e.dyn)
		_, err := e.exec.Step(ctx, e.desire("v3"))
		var se *handoff.SetError
		if !apierrors.IsForbidden(err) || !errors.As(err, &se) || !strings.HasPrefix(se.Name, e.fam.NamePrefix) || !strings.Contains(err.Error(), "cannot patch") {
			t.Fatalf("Step: got %v, want a Forbidden *SetError naming a set and the verb", err)
		}
		t.Logf("Step: %v", err)
		after := takeSnapshot(t, ctx, e.dyn)
		for k, o := range before {
			if how := unchanged(o, after[k]); how != "" {
				t.Errorf("%s was %s", k, how)
			}
		}
	})

	// The executor retires workloads first, so without get on Deployments
	// its very first retirement fails (before it deleted anything).
	t.Run("without get on Deployments the executor retires nothing", func(t *testing.T) {
		e.t = t
		bind(t, ctx, e.dyn, execUser, without(executorRules(), "deployments", "get"))
		waitAccess(t, ctx, e.dyn, execUser, "apps", "deployments", "get", false)
		v3 := e.desire("v3")
		began := time.Now()
		var stepErr error
		for round := 0; round < 100 && stepErr == nil; round++ {
			var res handoff.Result
			res, stepErr = e.exec.Step(ctx, v3)
			if stepErr == nil && !res.Requeue {
				t.Fatal("the upgrade settled without get on Deployments")
			}
			if err := e.ctrl.Reconcile(ctx); err != nil {
				t.Logf("reconcile: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		var re *handoff.ResourceError
		if !apierrors.IsForbidden(stepErr) || !errors.As(stepErr, &re) || re.Ref.Kind != "Deployment" {
			t.Fatalf("Step: got %v, want a Forbidden *ResourceError naming a Deployment", stepErr)
		}
		t.Logf("Step: %v", stepErr)
		sets, err := e.sets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sets {
			if s.Deleting {
				t.Errorf("set %s was retired", s.Name)
			}
		}
		if len(sets) != 4 {
			t.Errorf("%d sets, want v2's and v3's", len(sets))
		}
		_, keys := e.shared("v2", "v3")
		if deleted, _ := mon.stats(append(keys, "ConfigMap/"+e.ns+"/"+onlyIn("v2")), began); len(deleted) != 0 {
			t.Errorf("deleted without the permission to finish: %v", deleted)
		}

		bind(t, ctx, e.dyn, execUser, executorRules())
		waitAccess(t, ctx, e.dyn, execUser, "apps", "deployments", "get", true)
		e.converge(ctx, v3)
		e.checkEnd(ctx, "v2", "v3")
	})

	t.Run("without delete on webhook configurations Finalize keeps the finalizer", func(t *testing.T) {
		e.t = t
		e.converge(ctx, e.desire("v4", withObsoleteWebhook("v4")))
		bind(t, ctx, e.dyn, finUser, without(finalizeRules(), "validatingwebhookconfigurations", "delete"))
		waitAccess(t, ctx, e.dyn, finUser, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "delete", false)
		v5 := e.desire("v5")
		var re *handoff.ResourceError
		var ctrlErr error
		for round := 0; ; round++ {
			if round == 100 {
				t.Fatalf("Finalize: last error %v, want a Forbidden *ResourceError naming e2e-rbac-only-v4", ctrlErr)
			}
			if _, err := e.exec.Step(ctx, v5); err != nil {
				t.Logf("step: %v", err)
			}
			ctrlErr = e.ctrl.Reconcile(ctx)
			if apierrors.IsForbidden(ctrlErr) && errors.As(ctrlErr, &re) && re.Ref.Name == "e2e-rbac-only-v4" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("Finalize: %v", ctrlErr)
		if _, err := e.get(ctx, withObsolete(t, e, "v4")); err != nil {
			t.Errorf("webhook configuration e2e-rbac-only-v4: %v", err)
		}
		static, err := e.dyn.Resource(e.fam.Resource).Get(ctx, e.fam.SetName("v4", "static"), metav1.GetOptions{})
		if err != nil || static.GetDeletionTimestamp() == nil || !slices.Contains(static.GetFinalizers(), e.ctrl.Finalizer) {
			t.Errorf("v4 static set: want deleting and held by the finalizer, got %v (%v)", static, err)
		}

		bind(t, ctx, e.dyn, finUser, finalizeRules())
		waitAccess(t, ctx, e.dyn, finUser, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "delete", true)
		e.converge(ctx, v5)
		e.checkEnd(ctx, "v4", "v5")
		if _, err := e.get(ctx, withObsolete(t, e, "v4")); !apierrors.IsNotFound(err) {
			t.Errorf("webhook configuration e2e-rbac-only-v4: want NotFound once Finalize may delete it, got %v", err)
		}
	})
}

// withObsolete returns the webhook configuration withObsoleteWebhook added
// to generation gen.
func withObsolete(t *testing.T, e *env, gen string) *unstructured.Unstructured {
	t.Helper()
	for _, m := range e.manifests[gen]["static"] {
		if m.GetName() == "e2e-rbac-only-"+gen {
			return m
		}
	}
	t.Fatalf("generation %s lists no e2e-rbac-only-%s", gen, gen)
	return nil
}
