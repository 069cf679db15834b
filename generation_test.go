package handoff_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// observed is what the tests compare of an observed set.
type observed struct {
	Generation, Role string
	Readiness        handoff.Readiness
	Resources        []handoff.Ref
	Invalid          bool
}

func TestFamilyObserve(t *testing.T) {
	f := &fixture{fam: handoff.Family{
		Resource:        schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"},
		Kind:            setKind,
		Selector:        map[string]string{"operator.tekton.dev/created-by": "Comp", "operator.tekton.dev/type": "main"},
		GenerationLabel: "operator.tekton.dev/release-version",
	}}
	cmRef := handoff.Ref{Kind: "ConfigMap", Namespace: testNS, Name: "a"}
	ready := handoff.Readiness{State: handoff.Ready}
	tests := map[string]struct {
		spec   setSpec
		mutate func(u *unstructured.Unstructured)
		fam    func(handoff.Family) handoff.Family
		want   observed
	}{
		"a Ready set": {
			spec: setSpec{name: "s", gen: "v1", role: "static", ready: true, lists: []*unstructured.Unstructured{cm("a")}},
			want: observed{Generation: "v1", Role: "static", Readiness: ready, Resources: []handoff.Ref{cmRef}},
		},
		// Issue 13, item 8: a set released by a rollback is Ready only once
		// its controller applied it again; while it carries the mark, its
		// old Ready condition does not count.
		"a superseded set is not Ready, whatever its condition says": {
			spec: setSpec{name: "s", gen: "v1", role: "static", ready: true, supersededBy: "v2", lists: []*unstructured.Unstructured{cm("a")}},
			want: observed{Generation: "v1", Role: "static", Readiness: handoff.Readiness{
				State: handoff.NotReady, Reason: handoff.ReasonSuperseded, Message: "superseded by generation v2"},
				Resources: []handoff.Ref{cmRef}},
		},
		// Issue 13, item 4: what can be read is kept, with the error.
		"no role: invalid, with its resources": {
			spec: setSpec{name: "s", gen: "v1", lists: []*unstructured.Unstructured{cm("a")}},
			want: observed{Generation: "v1", Readiness: handoff.Readiness{State: handoff.Unknown, Reason: handoff.ReasonNoStatus, Message: "no status yet"},
				Resources: []handoff.Ref{cmRef}, Invalid: true},
		},
		"a manifest without a name: invalid, with the others": {
			spec: setSpec{name: "s", gen: "v1", role: "static", ready: true, lists: []*unstructured.Unstructured{cm("a")}},
			mutate: func(u *unstructured.Unstructured) {
				spec := u.Object["spec"].(map[string]any)
				spec["manifests"] = append(spec["manifests"].([]any), map[string]any{"apiVersion": "v1", "kind": "Secret"})
			},
			want: observed{Generation: "v1", Role: "static", Readiness: ready, Resources: []handoff.Ref{cmRef}, Invalid: true},
		},
		// Issue 13, item 6: the family's scope function, not a fixed list,
		// says a custom kind is cluster-scoped.
		"a cluster-scoped custom kind gets no target namespace": {
			spec: setSpec{name: "s", gen: "v1", role: "static", ready: true, lists: []*unstructured.Unstructured{
				cm("a"), mkObj("triggers.tekton.dev/v1alpha1", "ClusterInterceptor", "", "cel", "")}},
			mutate: func(u *unstructured.Unstructured) {
				// The ConfigMap comes without a namespace, as tekton lists it.
				items := u.Object["spec"].(map[string]any)["manifests"].([]any)
				unstructured.RemoveNestedField(items[0].(map[string]any), "metadata", "namespace")
			},
			fam: func(f handoff.Family) handoff.Family {
				f.TargetNamespace = func(*unstructured.Unstructured) string { return testNS }
				f.ClusterScoped = func(gk schema.GroupKind) bool { return gk.Kind == "ClusterInterceptor" }
				return f
			},
			want: observed{Generation: "v1", Role: "static", Readiness: ready, Resources: []handoff.Ref{
				cmRef, {Group: "triggers.tekton.dev", Kind: "ClusterInterceptor", Name: "cel"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u := f.setObject(tc.spec)
			if tc.mutate != nil {
				tc.mutate(u)
			}
			fam := f.fam
			if tc.fam != nil {
				fam = tc.fam(fam)
			}
			s, err := fam.Observe(u)
			if (err != nil) != tc.want.Invalid || !errors.Is(s.Invalid, err) {
				t.Fatalf("Observe error = %v, Set.Invalid = %v; want invalid %v", err, s.Invalid, tc.want.Invalid)
			}
			if err != nil && !errors.Is(err, handoff.ErrInvalidSet) {
				t.Errorf("Observe error = %v, want ErrInvalidSet", err)
			}
			got := observed{Generation: s.Generation, Role: s.Role, Readiness: s.Readiness, Resources: s.Resources, Invalid: s.Invalid != nil}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
		})
	}
}

// ObserveAll returns every set, invalid ones marked, so one unreadable set
// does not hide the rest (issue 13, item 4).
func TestFamilyObserveAllKeepsTheValidSets(t *testing.T) {
	f := &fixture{fam: handoff.Family{
		Resource:        schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"},
		Selector:        map[string]string{"operator.tekton.dev/created-by": "Comp", "operator.tekton.dev/type": "main"},
		GenerationLabel: "operator.tekton.dev/release-version",
	}}
	items := []unstructured.Unstructured{
		*f.setObject(setSpec{name: "good", gen: "v1", role: "static"}),
		*f.setObject(setSpec{name: "no-role", gen: "v1"}),
		*f.setObject(setSpec{name: "good-too", gen: "v1", role: "deployment"}),
	}
	sets, err := f.fam.ObserveAll(items)
	var se *handoff.SetError
	if !errors.As(err, &se) || se.Name != "no-role" || !errors.Is(err, handoff.ErrInvalidSet) {
		t.Fatalf("ObserveAll error = %v, want an ErrInvalidSet naming no-role", err)
	}
	var got []string
	for _, s := range sets {
		if s.Invalid != nil {
			got = append(got, s.Name+" (invalid)")
			continue
		}
		got = append(got, s.Name)
	}
	if diff := cmp.Diff([]string{"good", "no-role (invalid)", "good-too"}, got); diff != "" {
		t.Errorf("ObserveAll (-want +got):\n%s", diff)
	}
}

// A family whose labels the API server refuses fails Validate, and so
// every Step, with ErrInvalidFamily naming the label, before the List the
// API server would refuse with an untyped Bad Request.
func TestFamilyValidateLabels(t *testing.T) {
	ok := handoff.Family{Resource: schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"},
		Selector: map[string]string{"operator.tekton.dev/created-by": "Comp"}, GenerationLabel: "operator.tekton.dev/release-version"}
	long := strings.Repeat("a", 64)
	tests := map[string]struct {
		mod   func(*handoff.Family)
		field string // the field the error names; empty: valid
		says  string // and what it says of it
	}{
		"the family":                         {mod: func(*handoff.Family) {}},
		"an empty selector value":            {mod: func(f *handoff.Family) { f.Selector["app"] = "" }},
		"a selector value with a space":      {mod: func(f *handoff.Family) { f.Selector["app"] = "knative operator" }, field: "Family.Selector", says: "label app"},
		"a selector value of 64 characters":  {mod: func(f *handoff.Family) { f.Selector["app"] = long }, field: "Family.Selector", says: "label app"},
		"a selector key that is no name":     {mod: func(f *handoff.Family) { f.Selector["my app"] = "x" }, field: "Family.Selector", says: `label my app: key "my app"`},
		"a generation label that is no name": {mod: func(f *handoff.Family) { f.GenerationLabel = "release version" }, field: "Family.GenerationLabel", says: `"release version"`},
		"a role label that is no name":       {mod: func(f *handoff.Family) { f.RoleLabel = "-role" }, field: "Family.RoleLabel", says: `"-role"`},
		"a hash annotation that is no name":  {mod: func(f *handoff.Family) { f.HashAnnotation = "a/b/c" }, field: "Family.HashAnnotation", says: `"a/b/c"`},
		"a superseded annotation too long":   {mod: func(f *handoff.Family) { f.SupersededAnnotation = long }, field: "Family.SupersededAnnotation", says: "no more than 63"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := ok
			f.Selector = maps.Clone(ok.Selector)
			tc.mod(&f)
			err := f.Validate()
			if tc.field == "" {
				if err != nil {
					t.Errorf("Validate() = %v", err)
				}
				return
			}
			var ce *handoff.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, handoff.ErrInvalidFamily) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Validate() = %v, want a *ConfigError (ErrInvalidFamily) naming %s, saying %q", err, tc.field, tc.says)
			}
			if diff := cmp.Diff([]string{tc.field}, ce.Fields()); diff != "" {
				t.Errorf("Validate() names (-want +got):\n%s", diff)
			}
			_, err = (&handoff.Executor{Family: f, Dynamic: handofftest.NewCluster().Dynamic()}).Step(context.Background(), nil)
			if !errors.Is(err, handoff.ErrInvalidFamily) {
				t.Errorf("Step() = %v, want ErrInvalidFamily", err)
			}
		})
	}
}

// NewRole lists the objects' identities, and its hash changes with any
// object's content and with their order, and with nothing else.
func TestNewRole(t *testing.T) {
	cm := func(name, value string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": value}}}
		u.SetName(name)
		u.SetNamespace("ns")
		return u
	}
	a, b := cm("a", "1"), cm("b", "1")
	r, err := handoff.NewRole("static", []unstructured.Unstructured{a, b}, "crds")
	if err != nil {
		t.Fatal(err)
	}
	want := handoff.Role{Name: "static", After: []string{"crds"}, Resources: []handoff.Ref{
		{Kind: "ConfigMap", Namespace: "ns", Name: "a"}, {Kind: "ConfigMap", Namespace: "ns", Name: "b"}}}
	if d := cmp.Diff(want, r, cmpopts.IgnoreFields(handoff.Role{}, "Hash")); d != "" {
		t.Errorf("NewRole (-want +got):\n%s", d)
	}
	if len(r.Hash) != 16 {
		t.Errorf("Hash %q, want 16 hex digits", r.Hash)
	}
	hash := func(objs ...unstructured.Unstructured) string {
		t.Helper()
		r, err := handoff.NewRole("static", objs)
		if err != nil {
			t.Fatal(err)
		}
		return r.Hash
	}
	if got := hash(cm("a", "1"), cm("b", "1")); got != r.Hash {
		t.Errorf("the same objects again: hash %s, want %s", got, r.Hash)
	}
	if got := hash(a, cm("b", "2")); got == r.Hash {
		t.Errorf("another value in b: the same hash %s", got)
	}
	if got := hash(b, a); got == r.Hash {
		t.Errorf("another order: the same hash %s", got)
	}
	bad := cm("c", "1")
	bad.Object["data"] = map[string]any{"k": func() {}}
	if _, err := handoff.NewRole("static", []unstructured.Unstructured{a, bad}); err == nil || !strings.Contains(err.Error(), "ns/c") {
		t.Errorf("an object JSON cannot encode: %v, want an error naming it", err)
	}
}
