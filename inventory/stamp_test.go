package inventory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func stampObj(apiVersion, kind, ns, name string) unstructured.Unstructured {
	u := unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestStamp(t *testing.T) {
	dep := stampObj("apps/v1", "Deployment", "knative-serving", "activator")
	cm := stampObj("v1", "ConfigMap", "knative-serving", "config-logging")
	crd := stampObj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "services.serving.knative.dev")
	ref := func(u unstructured.Unstructured) handoff.Ref { return handoff.RefOf(&u) }
	family := []handoff.Set{
		// The old generation lists the Deployment too: the stamp is the
		// new generation's set's.
		{Name: "old", UID: "uid-old", Generation: "1.14.1", Resources: []handoff.Ref{ref(dep), ref(cm)}},
		{Name: "p0", UID: "uid-p0", Generation: "1.15.2", Resources: []handoff.Ref{ref(dep), ref(cm)}},
		{Name: "p1", UID: "uid-p1", Generation: "1.15.2", Resources: []handoff.Ref{ref(crd)}},
	}
	objs := []unstructured.Unstructured{dep, cm, crd}
	if err := inventory.Stamp(family, "1.15.2", objs); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"uid-p0@", "uid-p0@", "uid-p1@"} {
		if got := objs[i].GetAnnotations()[handoff.WriterAnnotation]; !strings.HasPrefix(got, want) {
			t.Errorf("%s stamped %q, want the stamp of %s", objs[i].GetName(), got, strings.TrimSuffix(want, "@"))
		}
	}

	// An object no inventory of the generation lists: refused, nothing
	// stamped.
	extra := stampObj("v1", "Secret", "knative-serving", "not-recorded")
	fresh := []unstructured.Unstructured{stampObj("v1", "ConfigMap", "knative-serving", "config-logging"), extra}
	err := inventory.Stamp(family, "1.15.2", fresh)
	if !errors.Is(err, inventory.ErrInvalidInventory) || !strings.Contains(err.Error(), "not-recorded") {
		t.Fatalf("Stamp of an unrecorded object = %v, want ErrInvalidInventory naming it", err)
	}
	for _, o := range fresh {
		if len(o.GetAnnotations()) != 0 {
			t.Errorf("%s was stamped although Stamp failed", o.GetName())
		}
	}
	// The transformer stamps alike, and refuses alike.
	stamp := inventory.Stamper(family, "1.15.2")
	one := stampObj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "services.serving.knative.dev")
	if err := stamp(&one); err != nil || !strings.HasPrefix(one.GetAnnotations()[handoff.WriterAnnotation], "uid-p1@") {
		t.Errorf("Stamper: %v, stamp %q, want uid-p1's", err, one.GetAnnotations()[handoff.WriterAnnotation])
	}
	if err := stamp(&extra); !errors.Is(err, inventory.ErrInvalidInventory) {
		t.Errorf("Stamper of an unrecorded object = %v, want ErrInvalidInventory", err)
	}

	// A generation being deleted records nothing to apply for.
	family[1].Deleting, family[2].Deleting = true, true
	if err := inventory.Stamp(family, "1.15.2", []unstructured.Unstructured{stampObj("v1", "ConfigMap", "knative-serving", "config-logging")}); err == nil {
		t.Error("Stamp for a generation whose inventory is being deleted succeeded")
	}
}
