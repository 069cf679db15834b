package handofftest_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const ns = "comp-ns"

// component returns a small component of a generation: static holds a
// Namespace, a shared ConfigMap, one of the generation's own and a webhook
// configuration; deployment holds a Deployment.
func component(gen string) map[string][]*unstructured.Unstructured {
	lbls := map[string]string{"version": gen}
	data := map[string]any{"data": map[string]any{"version": gen}}
	return map[string][]*unstructured.Unstructured{
		"static": {
			handofftest.Object("v1", "Namespace", "", ns, lbls, nil),
			handofftest.Object("v1", "ConfigMap", ns, "shared", lbls, data),
			handofftest.Object("v1", "ConfigMap", ns, "only-"+gen, lbls, data),
			handofftest.Object("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.webhook", lbls, nil),
		},
		"deployment": {
			handofftest.Object("apps/v1", "Deployment", ns, "controller", lbls, map[string]any{"spec": map[string]any{"replicas": int64(1)}}),
		},
	}
}

var roles = []string{"static", "deployment"}

// legacyRole is the role of a set made before handoff: only in its name.
func legacyRole(u *unstructured.Unstructured) (string, bool) {
	for _, r := range roles {
		if strings.Contains(u.GetName(), "-"+r+"-") {
			return r, true
		}
	}
	return "", false
}

// addLegacySets creates the sets of a generation the way tektoncd/operator
// does today: GenerateName, no role label.
func addLegacySets(t *testing.T, w *handofftest.World, gen string, manifests map[string][]*unstructured.Unstructured) {
	t.Helper()
	sets := w.Cluster.ClientFor("old-operator").Resource(handofftest.SetResource)
	for _, role := range roles {
		items := []any{}
		for _, m := range manifests[role] {
			items = append(items, m.DeepCopy().Object)
		}
		set := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.tekton.dev/v1alpha1", "kind": "TektonInstallerSet",
			"spec": map[string]any{"manifests": items}}}
		set.SetGenerateName("component-main-" + role + "-")
		lbls := maps.Clone(w.Family.Selector)
		lbls[w.Family.GenerationLabel] = gen
		set.SetLabels(lbls)
		if _, err := sets.Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A family changed once, with SetFamily, reaches the executor, the
// controller's passes and its finalizer: sets made before handoff, known
// only through RoleOf, are installed, upgraded from and removed.
func TestWorldSetFamily(t *testing.T) {
	ctx := context.Background()
	for name, tt := range map[string]struct {
		desired func(w *handofftest.World) *handoff.Desired // nil: removal
	}{
		"legacy sets are upgraded from": {desired: func(w *handofftest.World) *handoff.Desired { return w.Desire("v2", roles, component("v2")) }},
		"legacy sets are removed":       {desired: func(*handofftest.World) *handoff.Desired { return nil }},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("Comp")
			fam := w.Family
			fam.RoleOf = legacyRole
			w.SetFamily(fam)
			addLegacySets(t, w, "v1", component("v1"))
			for range w.Controller.ReadyAfter {
				if err := w.Controller.Reconcile(ctx); err != nil {
					t.Fatalf("the controller does not read the legacy sets: %v", err)
				}
			}
			v1 := w.Desire("v1", roles, component("v1"))
			if err := handofftest.CheckConverged(w.Cluster, w.Family, v1); err != nil {
				t.Fatalf("legacy v1 not installed: %v", err)
			}
			d := tt.desired(w)
			if _, err := w.Converge(ctx, d, 30); err != nil {
				t.Fatal(err)
			}
			if err := handofftest.CheckConverged(w.Cluster, w.Family, d); err != nil {
				t.Error(err)
			}
		})
	}
}

// Registering a generation again with changed manifests, DesireHashed
// gives the changed role a new hash, and the executor updates its set in
// place: same set, new content applied; unchanged manifests change nothing.
func TestWorldDesireHashed(t *testing.T) {
	ctx := context.Background()
	cm := handofftest.Key{Kind: "ConfigMap", Namespace: ns, Name: "shared"}
	for name, tt := range map[string]struct {
		edit        func(map[string][]*unstructured.Unstructured)
		wantUpdated []string // roles whose sets get a new spec
		wantData    string
	}{
		"a changed ConfigMap updates the static set in place": {
			edit: func(ms map[string][]*unstructured.Unstructured) {
				ms["static"][1].Object["data"] = map[string]any{"version": "v1-patched"}
			},
			wantUpdated: []string{"static"},
			wantData:    "v1-patched",
		},
		"the same manifests again change nothing": {
			edit:     func(map[string][]*unstructured.Unstructured) {},
			wantData: "v1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("Comp")
			v1 := w.DesireHashed("v1", roles, component("v1"))
			if _, err := w.Converge(ctx, v1, 30); err != nil {
				t.Fatal(err)
			}
			before := setsByRole(t, w)
			ms := component("v1")
			tt.edit(ms)
			patched := w.DesireHashed("v1", roles, ms)
			if _, err := w.Converge(ctx, patched, 30); err != nil {
				t.Fatal(err)
			}
			if err := handofftest.CheckConverged(w.Cluster, w.Family, patched); err != nil {
				t.Error(err)
			}
			after := setsByRole(t, w)
			var updated []string
			for _, role := range roles {
				if after[role].UID != before[role].UID {
					t.Errorf("%s set replaced (uid %s, was %s), want it updated in place", role, after[role].UID, before[role].UID)
				}
				if after[role].Object.GetGeneration() != before[role].Object.GetGeneration() {
					updated = append(updated, role)
				}
			}
			if diff := cmp.Diff(tt.wantUpdated, updated); diff != "" {
				t.Errorf("sets updated (-want +got):\n%s", diff)
			}
			o, _ := w.Cluster.Get(cm)
			if got := o.Object["data"].(map[string]any)["version"]; got != tt.wantData {
				t.Errorf("%s has version %v, want %s", cm, got, tt.wantData)
			}
		})
	}
}

// setsByRole returns the world's sets by role.
func setsByRole(t *testing.T, w *handofftest.World) map[string]handoff.Set {
	t.Helper()
	out := map[string]handoff.Set{}
	for _, o := range w.Cluster.Objects() {
		if o.GetKind() != w.Family.Kind {
			continue
		}
		s, err := w.Family.Observe(o)
		if err != nil {
			t.Fatal(err)
		}
		out[s.Role] = s
	}
	return out
}

// Converge checks I5 from its first round on: an old set retired in the
// first round, while the desired generation is not Ready, is caught as
// surely as one retired later. The retirement is made by the executor's
// Build function, which runs inside the executor's Step at each create.
func TestWorldConvergeGatesEveryRound(t *testing.T) {
	ctx := context.Background()
	for name, tt := range map[string]struct {
		retireAt int // the Build call that retires an old set; 0: none
		wantI5   bool
	}{
		"no early retirement":                   {},
		"an old set retired in the first round": {retireAt: 1, wantI5: true},
		"an old set retired in a later round":   {retireAt: 2, wantI5: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("Comp")
			v1 := w.Desire("v1", roles, component("v1"))
			if _, err := w.Converge(ctx, v1, 30); err != nil {
				t.Fatal(err)
			}
			v2 := w.Desire("v2", roles, component("v2"))
			builds := 0
			w.Executor.Build = func(ctx context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
				if builds++; builds == tt.retireAt {
					old := w.Family.SetName("v1", "deployment")
					if err := w.Cluster.ClientFor("rogue").Resource(handofftest.SetResource).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				return w.Manifests.Build(ctx, d, r)
			}
			_, err := w.Converge(ctx, v2, 30)
			if got := err != nil && strings.Contains(err.Error(), "I5:"); got != tt.wantI5 {
				t.Errorf("Converge: %v; want an I5 error: %t", err, tt.wantI5)
			}
			if !tt.wantI5 && err != nil {
				t.Error(err)
			}
		})
	}
}

func TestContentHash(t *testing.T) {
	cm := func(data map[string]any) *unstructured.Unstructured {
		return handofftest.Object("v1", "ConfigMap", ns, "c", nil, map[string]any{"data": data})
	}
	base := handofftest.ContentHash([]*unstructured.Unstructured{cm(map[string]any{"a": "1", "b": "2"})})
	for name, tt := range map[string]struct {
		manifests []*unstructured.Unstructured
		same      bool
	}{
		"the same content, built in another order": {manifests: []*unstructured.Unstructured{cm(map[string]any{"b": "2", "a": "1"})}, same: true},
		"a changed value":                          {manifests: []*unstructured.Unstructured{cm(map[string]any{"a": "1", "b": "3"})}},
		"one manifest more":                        {manifests: []*unstructured.Unstructured{cm(map[string]any{"a": "1", "b": "2"}), cm(nil)}},
		"no manifests":                             {},
	} {
		t.Run(name, func(t *testing.T) {
			if got := handofftest.ContentHash(tt.manifests); (got == base) != tt.same {
				t.Errorf("ContentHash = %s, base %s; want the same: %t", got, base, tt.same)
			}
		})
	}
}
