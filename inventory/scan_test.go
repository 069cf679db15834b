package inventory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
)

// Controlled finds, in the component's namespace, every object the
// component object controls, of any namespaced kind the cluster serves (a
// custom kind the current release no longer has among them), over more
// than one page; it leaves what another object controls, what the
// component owns without controlling, what nobody owns, what lies in
// another namespace, and every cluster-scoped object, labelled like the
// component's or not.
func TestControlled(t *testing.T) {
	const uid = types.UID("uid-of-knativeserving")
	c := handofftest.NewCluster()
	c.Register(schema.GroupVersionResource{Group: "caching.internal.knative.dev", Version: "v1alpha1", Resource: "images"}, "Image", true)
	owner := func(u types.UID, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "operator.knative.dev/v1beta1", Kind: "KnativeServing", Name: "ks", UID: u, Controller: &controller}
	}
	obj := func(apiVersion, kind, ns, name string, refs ...metav1.OwnerReference) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"app.kubernetes.io/name": "knative-serving"})
		u.SetOwnerReferences(refs)
		return u
	}
	var want []handoff.Ref
	add := func(u *unstructured.Unstructured, found bool) {
		t.Helper()
		if err := c.Add(u); err != nil {
			t.Fatal(err)
		}
		if found {
			want = append(want, handoff.RefOf(u))
		}
	}
	add(obj("v1", "Namespace", "", "knative-serving"), false)
	add(obj("v1", "Namespace", "", "elsewhere"), false)
	for i := 0; i < 1200; i++ { // three pages
		add(obj("v1", "ConfigMap", "knative-serving", "config-"+string(rune('a'+i/100))+string(rune('a'+i%100/10))+string(rune('a'+i%10)), owner(uid, true)), true)
	}
	add(obj("apps/v1", "Deployment", "knative-serving", "controller", owner(uid, true)), true)
	add(obj("caching.internal.knative.dev/v1alpha1", "Image", "knative-serving", "queue-proxy", owner(uid, true)), true)
	add(obj("v1", "Secret", "knative-serving", "someone-elses", owner("another-uid", true)), false)
	add(obj("v1", "Secret", "knative-serving", "owned-not-controlled", owner(uid, false)), false)
	add(obj("v1", "Secret", "knative-serving", "unowned"), false)
	add(obj("v1", "Secret", "elsewhere", "controlled-elsewhere", owner(uid, true)), false)
	add(obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "knative-serving-admin", owner(uid, true)), false)
	add(obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "labelled-alike"), false)

	srv := c.Serve("operator")
	defer srv.Close()
	disco := discovery.NewDiscoveryClientForConfigOrDie(srv.Config())
	md := metadata.NewForConfigOrDie(srv.Config())
	got, err := inventory.Controlled(context.Background(), disco, md, "knative-serving", uid)
	if err != nil {
		t.Fatal(err)
	}
	var refs []handoff.Ref
	for i := range got {
		refs = append(refs, handoff.RefOf(&got[i]))
		if got[i].GetAPIVersion() == "" || len(got[i].GetOwnerReferences()) != 1 {
			t.Errorf("%s: apiVersion %q, owner references %v", refs[i], got[i].GetAPIVersion(), got[i].GetOwnerReferences())
		}
	}
	byString := cmpopts.SortSlices(func(a, b handoff.Ref) bool { return a.String() < b.String() })
	if d := cmp.Diff(want, refs, byString); d != "" {
		t.Errorf("Controlled (-want +got):\n%s", d)
	}
	gen, err := inventory.Inventory{Namespace: "knative-serving", Component: "ks"}.Generation("1.13.2-installed", got)
	if err != nil {
		t.Fatalf("what Controlled found is no generation: %v", err)
	}
	if n := len(gen.Desired.Roles); n == 0 {
		t.Error("a generation of no role")
	}
	if _, err := inventory.Controlled(context.Background(), disco, md, "", uid); err == nil {
		t.Error("Controlled with no namespace: no error")
	}

	// Under an operator's RBAC, a kind it may not list is left out and
	// named; the rest is found as before. Any other failed List fails the
	// scan with no objects.
	secrets := schema.GroupResource{Resource: "secrets"}
	c.InjectFaults(func(call handofftest.Call) handofftest.Fault {
		if call.Verb == "list" && call.Resource.GroupResource() == secrets {
			return handofftest.Fault{Err: apierrors.NewForbidden(secrets, "", errors.New("RBAC: no rule"))}
		}
		return handofftest.Fault{}
	}, "operator")
	got, err = inventory.Controlled(context.Background(), disco, md, "knative-serving", uid)
	var unlisted *inventory.UnlistedError
	if !errors.Is(err, inventory.ErrIncomplete) || !errors.As(err, &unlisted) || unlisted.Resource != secrets ||
		unlisted.Namespace != "knative-serving" || !apierrors.IsForbidden(err) {
		t.Fatalf("Controlled with secrets forbidden: error %v, want ErrIncomplete with an *UnlistedError for secrets in knative-serving", err)
	}
	if len(got) != len(want) {
		t.Errorf("Controlled with secrets forbidden found %d objects, want the %d found before (no secret was among them)", len(got), len(want))
	}
	c.DisableFaults()
	c.InjectFaults(func(call handofftest.Call) handofftest.Fault {
		if call.Verb == "list" && call.Resource.Resource == "deployments" {
			return handofftest.Fault{Err: apierrors.NewInternalError(errors.New("etcd is down"))}
		}
		return handofftest.Fault{}
	}, "operator")
	got, err = inventory.Controlled(context.Background(), disco, md, "knative-serving", uid)
	if err == nil || errors.Is(err, inventory.ErrIncomplete) || got != nil {
		t.Errorf("Controlled with a List failing: %d objects, error %v; want none and an error that is not ErrIncomplete", len(got), err)
	}
}
