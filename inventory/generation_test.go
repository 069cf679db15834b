package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestValidate(t *testing.T) {
	ok := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving"}
	tests := map[string]struct {
		mod  func(*inventory.Inventory)
		says string // empty: valid
	}{
		"the minimal inventory":        {mod: func(*inventory.Inventory) {}},
		"extra labels":                 {mod: func(i *inventory.Inventory) { i.Selector = map[string]string{"app": "knative-operator"} }},
		"the largest budget":           {mod: func(i *inventory.Inventory) { i.MaxBytes = 1 << 20 }},
		"no namespace":                 {mod: func(i *inventory.Inventory) { i.Namespace = "" }, says: "namespace"},
		"a namespace that is no label": {mod: func(i *inventory.Inventory) { i.Namespace = "Knative" }, says: "namespace"},
		"no component":                 {mod: func(i *inventory.Inventory) { i.Component = "" }, says: "no component"},
		// Any other component is labelled and named in a hashed form
		// (TestNamesThatAreNoLabelValues).
		"a component that is no label":  {mod: func(i *inventory.Inventory) { i.Component = "knative serving" }},
		"a component of 300 characters": {mod: func(i *inventory.Inventory) { i.Component = strings.Repeat("k", 300) }},
		"a component with capitals":     {mod: func(i *inventory.Inventory) { i.Component = "Serving" }},
		"extra labels that clash":       {mod: func(i *inventory.Inventory) { i.Selector = map[string]string{inventory.ComponentLabel: "x"} }, says: "selector sets label"},
		"a clash with the role label":   {mod: func(i *inventory.Inventory) { i.Selector = map[string]string{handoff.DefaultRoleLabel: "x"} }, says: "selector sets label"},
		// The API server refuses the List of the family with these, and
		// every ConfigMap the executor would make.
		"an extra label value with a space":     {mod: func(i *inventory.Inventory) { i.Selector = map[string]string{"app": "knative operator"} }, says: "selector label app"},
		"an extra label value of 64 characters": {mod: func(i *inventory.Inventory) { i.Selector = map[string]string{"app": strings.Repeat("a", 64)} }, says: "selector label app"},
		"an extra label key that is no name":    {mod: func(i *inventory.Inventory) { i.Selector = map[string]string{"my app": "x"} }, says: "selector label key"},
		"a budget too small":                    {mod: func(i *inventory.Inventory) { i.MaxBytes = 100 }, says: "MaxBytes 100"},
		"a budget over the limit":               {mod: func(i *inventory.Inventory) { i.MaxBytes = 1<<20 + 1 }, says: "MaxBytes 1048577"},
		"a negative budget":                     {mod: func(i *inventory.Inventory) { i.MaxBytes = -1 }, says: "MaxBytes -1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inv := ok
			tc.mod(&inv)
			err := inv.Validate()
			if tc.says == "" {
				if err != nil {
					t.Errorf("Validate() = %v", err)
				}
				return
			}
			if !errors.Is(err, handoff.ErrInvalidFamily) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Validate() = %v, want ErrInvalidFamily saying %q", err, tc.says)
			}
			if _, gerr := inv.Generation("v1", nil); gerr == nil {
				t.Error("Generation accepted an invalid inventory")
			}
		})
	}
}

func TestFamily(t *testing.T) {
	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving", Selector: map[string]string{"app": "op"}}
	f := inv.Family()
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app": "op", "handoff.kube-handoff.io/inventory": "knative-serving", "handoff.kube-handoff.io/set-kind": "inventory"}
	if d := cmp.Diff(want, f.Selector); d != "" {
		t.Errorf("Selector (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"handoff.kube-handoff.io/set-kind": "inventory"}, f.KindSelector); d != "" {
		t.Errorf("KindSelector (-want +got):\n%s", d)
	}
	if f.Resource != (schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}) || f.Kind != "ConfigMap" {
		t.Errorf("Resource %v, Kind %s", f.Resource, f.Kind)
	}
	// sha256("v1") starts 3bfc269594 (sha256sum).
	if got := f.SetName("v1", "part-0"); got != "knative-serving-inventory-part-0-3bfc269594" {
		t.Errorf("SetName = %s", got)
	}
}

func TestGenerationInvalid(t *testing.T) {
	inv := inventory.Inventory{Namespace: "ns", Component: "c"}
	if _, err := inv.Generation("", nil); !errors.Is(err, handoff.ErrInvalidDesired) {
		t.Errorf("empty generation: %v, want ErrInvalidDesired", err)
	}
	g, err := inv.Generation("v1", []unstructured.Unstructured{obj("v1", "ConfigMap", "ns", "a"), obj("apps/v1", "Deployment", "ns", "d"), obj("v2", "ConfigMap", "ns", "a")})
	var oe *inventory.ObjectError
	if g != nil || !errors.As(err, &oe) || oe.Index != 2 || !strings.Contains(err.Error(), "ConfigMap ns/a") {
		t.Errorf("one object at two API versions: %v, %v; want no generation and an ObjectError naming object 2, ConfigMap ns/a", g, err)
	}
}

// configMaps makes n ConfigMaps in ns named cm-000, cm-001, ...; each has
// the data key "ns_cm-NNN__ConfigMap" (20 bytes) and value "v1", 28 bytes
// of JSON with quotes, colon and comma.
func configMaps(n int) []unstructured.Unstructured {
	out := make([]unstructured.Unstructured, n)
	for i := range out {
		out[i] = obj("v1", "ConfigMap", "ns", fmt.Sprintf("cm-%03d", i))
	}
	return out
}

func names(refs []handoff.Ref) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Name
	}
	return out
}

func nameRange(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("cm-%03d", i))
	}
	return out
}

func TestGenerationParts(t *testing.T) {
	// A budget of 4096 bytes holds 2 for the braces and 146 entries of 28
	// (4088); 300 entries make parts of 146, 146 and 8.
	inv := inventory.Inventory{Namespace: "ns", Component: "c", MaxBytes: 4096}
	g, err := inv.Generation("v1", configMaps(300))
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, r := range g.Desired.Roles {
		roles = append(roles, r.Name)
		if len(r.After) != 0 {
			t.Errorf("role %s waits for %v", r.Name, r.After)
		}
	}
	if d := cmp.Diff([]string{"part-0", "part-1", "part-2"}, roles); d != "" {
		t.Fatalf("roles (-want +got):\n%s", d)
	}
	for i, want := range [][]string{nameRange(0, 145), nameRange(146, 291), nameRange(292, 299)} {
		if d := cmp.Diff(want, names(g.Desired.Roles[i].Resources)); d != "" {
			t.Errorf("part-%d resources (-want +got):\n%s", i, d)
		}
	}

	// The same objects in reverse order: the same parts and hashes.
	rev := configMaps(300)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	g2, err := inv.Generation("v1", rev)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(g.Desired, g2.Desired, ignoreBuild); d != "" {
		t.Errorf("reversed input (-first +reversed):\n%s", d)
	}

	// Another API version for cm-299 changes the hash of part-2 alone.
	changed := configMaps(300)
	changed[299] = obj("v2", "ConfigMap", "ns", "cm-299")
	g3, err := inv.Generation("v1", changed)
	if err != nil {
		t.Fatal(err)
	}
	for i, same := range []bool{true, true, false} {
		if got := g.Desired.Roles[i].Hash == g3.Desired.Roles[i].Hash; got != same {
			t.Errorf("part-%d: hash unchanged %v, want %v", i, got, same)
		}
	}
}

func TestGenerationEmpty(t *testing.T) {
	g, err := inventory.Inventory{Namespace: "ns", Component: "c"}.Generation("v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Desired.Roles) != 1 || g.Desired.Roles[0].Name != "part-0" || len(g.Desired.Roles[0].Resources) != 0 {
		t.Errorf("roles of an empty generation: %+v, want one empty part-0", g.Desired.Roles)
	}
}

func TestBuild(t *testing.T) {
	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving"}
	g, err := inv.Generation("v1", []unstructured.Unstructured{
		obj("apps/v1", "Deployment", "knative-serving", "activator"),
		obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "config.webhook.serving.knative.dev"),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.Build(context.Background(), *g.Desired, g.Desired.Roles[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"namespace":   "knative-operator",
			"annotations": map[string]any{"handoff.kube-handoff.io/inventory-count": "2"},
		},
		"data": map[string]any{
			"knative-serving_activator_apps_Deployment":                                                       "apps/v1",
			"_config.webhook.serving.knative.dev_admissionregistration.k8s.io_ValidatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
		},
	}
	if d := cmp.Diff(want, got.Object); d != "" {
		t.Errorf("Build (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"v1"}, g.Versions(schema.GroupKind{Group: "apps", Kind: "Deployment"})); d != "" {
		t.Errorf("Versions (-want +got):\n%s", d)
	}
	if _, err := g.Build(context.Background(), *g.Desired, handoff.Role{Name: "part-1"}); !errors.Is(err, handoff.ErrInvalidDesired) {
		t.Errorf("Build of a part the generation lacks: %v, want ErrInvalidDesired", err)
	}
	other := *g.Desired
	other.Generation = "v2"
	if _, err := g.Build(context.Background(), other, g.Desired.Roles[0]); !errors.Is(err, handoff.ErrInvalidDesired) {
		t.Errorf("Build of another generation: %v, want ErrInvalidDesired", err)
	}
}
