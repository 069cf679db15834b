package inventory_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ignoreBuild compares Desireds by their data: Build is a function.
var ignoreBuild = cmpopts.IgnoreFields(handoff.Desired{}, "Build")

func sum10(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:10]
}

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("k", 64)
	tests := map[string]struct{ in, want string }{
		"a label value stays as it is":                 {in: "v0.80.0", want: "v0.80.0"},
		"63 characters are a label value":              {in: long[:63], want: long[:63]},
		"a build suffix is kept readable, then hashed": {in: "1.2.3+build.7", want: "1.2.3-build.7-" + sum10("1.2.3+build.7")},
		"64 characters keep 52, then the hash":         {in: long, want: long[:52] + "-" + sum10(long)},
		"what cannot begin or end a label is trimmed":  {in: "+v1+", want: "v1-" + sum10("+v1+")},
		"nothing a label may hold: the hash alone":     {in: "+++", want: sum10("+++")},
		"a space and a colon":                          {in: "knative serving:1", want: "knative-serving-1-" + sum10("knative serving:1")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := inventory.LabelValue(tc.in)
			if got != tc.want {
				t.Errorf("LabelValue(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
				t.Errorf("LabelValue(%q) = %q is no label value: %v", tc.in, got, msgs)
			}
		})
	}
	// Names that differ only where a label value cannot hold them stay apart.
	if a, b := inventory.LabelValue("1.2.3+a"), inventory.LabelValue("1.2.3-a"); a == b {
		t.Errorf("LabelValue gives %q for both 1.2.3+a and 1.2.3-a", a)
	}
}

// A component named with capitals and past 63 characters, and a
// generation with a build suffix, are recorded, labelled and stamped: the
// labels and names the API server requires, the names kept whole in
// annotations.
func TestNamesThatAreNoLabelValues(t *testing.T) {
	ctx := context.Background()
	component := strings.Repeat("KnativeServing", 5) // 70 characters, capitals
	const version = "1.14.1+build.7"
	c := handofftest.NewCluster(handofftest.RequireNamespaces("knative-operator", servingNS))
	inv := inventory.Inventory{Namespace: "knative-operator", Component: component}
	if err := inv.Validate(); err != nil {
		t.Fatal(err)
	}
	objs := []unstructured.Unstructured{obj("v1", "ConfigMap", servingNS, "config-network"), obj("apps/v1", "Deployment", servingNS, "activator")}
	g, err := inv.Generation(version, objs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.Desired.Generation, "1.14.1-build.7-"+sum10(version); got != want {
		t.Errorf("Desired.Generation = %q, want %q", got, want)
	}
	exec := inv.Executor(c.ClientFor("executor"), c.Mapper())
	res, err := exec.Step(ctx, g.Desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Family) != 1 {
		t.Fatalf("Result.Family = %v, want the one inventory part recorded", res.Family)
	}
	cm, ok := c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: "knative-operator", Name: res.Family[0].Name})
	if !ok {
		t.Fatalf("inventory %s not in the cluster", res.Family[0].Name)
	}
	if msgs := validation.IsDNS1123Subdomain(cm.GetName()); len(msgs) > 0 {
		t.Errorf("ConfigMap name %q: %v", cm.GetName(), msgs)
	}
	if !strings.HasPrefix(cm.GetName(), "knativeservingknativeserving") {
		t.Errorf("ConfigMap name %q does not start with the component, lower-cased", cm.GetName())
	}
	for k, v := range cm.GetLabels() {
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, msgs)
		}
	}
	wantAnn := map[string]string{inventory.ComponentNameAnnotation: component, inventory.GenerationNameAnnotation: version}
	if d := cmp.Diff(wantAnn, cm.GetAnnotations(), cmpopts.IgnoreMapEntries(func(k, _ string) bool { _, ok := wantAnn[k]; return !ok })); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	// The family reads back what it wrote, and the operator stamps with
	// the name it gave the generation.
	if err := inventory.Stamp(res.Family, version, objs); err != nil {
		t.Errorf("Stamp with the generation's name: %v", err)
	}
	// The inventory's own family selects it.
	sets, err := inv.Family().ObserveAll([]unstructured.Unstructured{*cm})
	if err != nil || len(sets) != 1 || sets[0].Generation != g.Desired.Generation {
		t.Errorf("the family observes %v (%v), want one set of generation %s", sets, err, g.Desired.Generation)
	}
}

// GenerationName is a label value that begins with the version, is the
// same for the same objects in any order and with any content, and differs
// when an object comes or goes, moves, changes API version, or when the
// version changes, even where two versions make the same label text.
func TestGenerationName(t *testing.T) {
	cm := func(ns, name string) unstructured.Unstructured {
		u := unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	hpa := func(apiVersion string) unstructured.Unstructured {
		u := cm("ns", "h")
		u.SetAPIVersion(apiVersion)
		u.SetKind("HorizontalPodAutoscaler")
		return u
	}
	name := func(version string, objs ...unstructured.Unstructured) string {
		t.Helper()
		n, err := inventory.GenerationName(version, objs)
		if err != nil {
			t.Fatal(err)
		}
		if msgs := validation.IsValidLabelValue(n); len(msgs) > 0 {
			t.Errorf("GenerationName(%q) = %q: no label value: %v", version, n, msgs)
		}
		return n
	}
	base := name("1.15.2", cm("ns", "a"), cm("ns", "b"), hpa("autoscaling/v2"))
	if !strings.HasPrefix(base, "1.15.2-") || len(base) != len("1.15.2-")+10 {
		t.Errorf("GenerationName = %q, want 1.15.2- and 10 hex digits", base)
	}
	changed := cm("ns", "a")
	changed.SetLabels(map[string]string{"content": "other"})
	if got := name("1.15.2", hpa("autoscaling/v2"), cm("ns", "b"), changed, cm("ns", "b")); got != base {
		t.Errorf("reordered, with other content and a repeat: %q, want %q", got, base)
	}
	others := map[string]string{
		"an object more":        name("1.15.2", cm("ns", "a"), cm("ns", "b"), hpa("autoscaling/v2"), cm("ns", "c")),
		"an object less":        name("1.15.2", cm("ns", "a"), hpa("autoscaling/v2")),
		"an object moved":       name("1.15.2", cm("ns", "a"), cm("other", "b"), hpa("autoscaling/v2")),
		"another API version":   name("1.15.2", cm("ns", "a"), cm("ns", "b"), hpa("autoscaling/v2beta2")),
		"another version":       name("1.15.3", cm("ns", "a"), cm("ns", "b"), hpa("autoscaling/v2")),
		"the same label text":   name("1.15.2+a", cm("ns", "a"), cm("ns", "b"), hpa("autoscaling/v2")),
		"the same text, again":  name("1.15.2 a", cm("ns", "a"), cm("ns", "b"), hpa("autoscaling/v2")),
		"a version of 80 chars": name(strings.Repeat("9", 80), cm("ns", "a")),
		"no version":            name("", cm("ns", "a")),
	}
	seen := map[string]string{base: "the first"}
	for what, n := range others {
		if prev, ok := seen[n]; ok {
			t.Errorf("%s: %q, the name of %s too", what, n, prev)
		}
		seen[n] = what
	}
	if n := others["the same label text"]; !strings.HasPrefix(n, "1.15.2-a-") {
		t.Errorf("version 1.15.2+a: %q, want it to begin 1.15.2-a-", n)
	}
	if _, err := inventory.GenerationName("1", []unstructured.Unstructured{hpa("autoscaling/v2"), hpa("autoscaling/v1")}); !errors.Is(err, inventory.ErrInvalidInventory) {
		t.Errorf("an object at two API versions: %v, want ErrInvalidInventory", err)
	}
}
