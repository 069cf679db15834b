package inventory_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// After an update in place that shrinks a generation from 12 parts to 5,
// the parts it dropped stay live, superseded by their own generation,
// until the new parts are rolled out; an object one of them still lists
// is stamped for the part that lists it now, whatever the order of the
// names ("part-10" sorts before "part-4"): the probe of part-4 waits for
// that stamp, and part-10 retires only once part-4 is Ready.
func TestStampAfterAnInPlaceShrink(t *testing.T) {
	dep := stampObj("apps/v1", "Deployment", "knative-serving", "activator")
	cm := stampObj("v1", "ConfigMap", "knative-serving", "config-logging")
	ref := func(u unstructured.Unstructured) handoff.Ref { return handoff.RefOf(&u) }
	var family []handoff.Set
	for i := 0; i < 12; i++ {
		s := handoff.Set{Name: fmt.Sprintf("part-%d", i), UID: types.UID(fmt.Sprintf("uid-part-%d", i)), Generation: "1.15.2", Role: fmt.Sprintf("part-%d", i)}
		if i >= 5 {
			s.SupersededBy = "1.15.2" // a role the generation no longer has
		}
		family = append(family, s)
	}
	family[10].Resources = []handoff.Ref{ref(dep), ref(cm)}
	family[4].Resources = []handoff.Ref{ref(dep)}
	family[3].Resources = []handoff.Ref{ref(cm)}
	// As a List returns them: by name.
	sort.Slice(family, func(i, j int) bool { return family[i].Name < family[j].Name })

	objs := []unstructured.Unstructured{dep, cm}
	if err := inventory.Stamp(family, "1.15.2", objs); err != nil {
		t.Fatal(err)
	}
	one := stampObj("apps/v1", "Deployment", "knative-serving", "activator")
	if err := inventory.Stamper(family, "1.15.2")(&one); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj  unstructured.Unstructured
		want string
	}{{objs[0], "uid-part-4@"}, {objs[1], "uid-part-3@"}, {one, "uid-part-4@"}} {
		if got := tc.obj.GetAnnotations()[handoff.WriterAnnotation]; !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s stamped %q, want the stamp of %s", tc.obj.GetName(), got, strings.TrimSuffix(tc.want, "@"))
		}
	}

	// An object only a dropped part lists is no longer in the generation.
	gone := stampObj("v1", "Secret", "knative-serving", "dropped")
	family[2].Resources = append(family[2].Resources, ref(gone)) // family[2] is part-10
	if err := inventory.Stamp(family, "1.15.2", []unstructured.Unstructured{gone}); !errors.Is(err, inventory.ErrInvalidInventory) {
		t.Errorf("Stamp of an object only a superseded part lists = %v, want ErrInvalidInventory", err)
	}

	// Within the parts the generation has, the lowest part number wins,
	// in numeric order (a part updated in place before the part that
	// listed the object before it).
	for i := range family {
		family[i].SupersededBy = ""
	}
	family[2].Resources = []handoff.Ref{ref(dep)} // part-10
	both := stampObj("apps/v1", "Deployment", "knative-serving", "activator")
	if err := inventory.Stamper(family, "1.15.2")(&both); err != nil || !strings.HasPrefix(both.GetAnnotations()[handoff.WriterAnnotation], "uid-part-4@") {
		t.Errorf("Stamper: %v, stamp %q, want part-4's", err, both.GetAnnotations()[handoff.WriterAnnotation])
	}
}
