package handoff_test

import (
	"context"
	"testing"

	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// An operator whose rights come from ClusterRoles it installed (knative's
// aggregate the release's own) loses them with those roles: the RBAC
// objects of a retirement are deleted after everything else of it, across
// the sets retired together, and not at all while something else of it
// could not be deleted.
func TestRBACDeletedLast(t *testing.T) {
	const rbac = "rbac.authorization.k8s.io/v1"
	admin := mkObj(rbac, "ClusterRole", "", "comp-admin", "")
	binding := mkObj(rbac, "ClusterRoleBinding", "", "comp-admin", "")
	validation := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.comp", "")
	aggregated := mkObj(rbac, "ClusterRole", "", "comp-aggregated", "")
	defaulting := mkObj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", "defaulting.comp", "")
	rbacKeys := []handofftest.Key{handofftest.KeyOf(admin), handofftest.KeyOf(binding), handofftest.KeyOf(aggregated)}

	for _, tc := range []struct {
		name string
		// failing: the executor's deletes of this object fail the first Step.
		failing *unstructured.Unstructured
	}{
		{name: "removal"},
		{name: "a webhook configuration not deleted at first", failing: defaulting},
		{name: "the first set's webhook configuration not deleted at first", failing: validation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, handofftest.WithoutAutoGC())
			f.exec.Prune.Unowned = append(f.exec.Prune.Unowned,
				schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
				schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"})
			// Neither set has a finalizer: the Step finalizes both itself.
			// Each lists its RBAC objects first.
			static := []*unstructured.Unstructured{admin, binding, validation}
			deployment := []*unstructured.Unstructured{aggregated, defaulting}
			f.seed(t, []setSpec{
				{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: static},
				{name: "deployment-v1", gen: "v1", role: "deployment", age: 20, ready: true, lists: deployment},
			}, append(static, deployment...), nil)
			ctx := context.Background()

			if tc.failing != nil {
				failing := handofftest.KeyOf(tc.failing)
				f.c.InjectFaults(func(c handofftest.Call) handofftest.Fault {
					if c.Verb == "delete" && c.Name == failing.Name && c.Resource.Group == failing.Group {
						return handofftest.Fault{Mode: handofftest.BeforeCommit, Err: apierrors.NewForbidden(c.Resource.GroupResource(), c.Name, nil)}
					}
					return handofftest.Fault{}
				}, "executor")
				if _, err := f.exec.Step(ctx, nil); err == nil {
					t.Fatalf("Step: no error, though %s could not be deleted", failing)
				}
				if _, ok := f.c.Get(failing); !ok {
					t.Fatalf("%s is gone, though its delete failed", failing)
				}
				for _, k := range rbacKeys {
					if _, ok := f.c.Get(k); !ok {
						t.Errorf("%s deleted while %s, which may need its rights, could not be", k, failing)
					}
				}
				f.c.DisableFaults()
			}
			settled := false
			for i := 0; i < 5 && !settled; i++ {
				res, err := f.exec.Step(ctx, nil)
				if err != nil {
					t.Fatalf("Step %d: %v", i+1, err)
				}
				settled = !res.Requeue
			}
			if !settled {
				t.Fatal("the removal did not settle in 5 Steps")
			}
			for _, o := range append(static, deployment...) {
				if _, ok := f.c.Get(handofftest.KeyOf(o)); ok {
					t.Errorf("%s is left after the removal", handofftest.KeyOf(o))
				}
			}
			var lastOther, firstRBAC = -1, -1
			for i, w := range f.c.Writes() {
				if w.Actor != "executor" || w.Verb != "delete" || w.Key.Kind == setKind {
					continue
				}
				switch {
				case w.Key.Group == "rbac.authorization.k8s.io" && firstRBAC < 0:
					firstRBAC = i
				case w.Key.Group != "rbac.authorization.k8s.io":
					lastOther = i
				}
			}
			if firstRBAC < 0 || lastOther < 0 {
				t.Fatalf("no delete of an RBAC object (%d) or of another (%d) recorded", firstRBAC, lastOther)
			}
			if lastOther > firstRBAC {
				t.Errorf("write %d deletes an RBAC object before write %d deletes another obsolete object", firstRBAC, lastOther)
			}
		})
	}
}
