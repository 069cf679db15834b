package inventory_test

// The inventory's family, driven through the core executor on
// k8s.io/client-go/dynamic/fake.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// readyProbe says every set is Ready: there is no set controller, and
// these tests are about the inventory, not about rollouts.
type readyProbe struct{}

func (readyProbe) Ready(*unstructured.Unstructured) handoff.Readiness {
	return handoff.Readiness{State: handoff.Ready}
}

// fakeClient is a fake dynamic client that serves ConfigMaps and, as an API
// server does, gives each created object a UID (the fake keeps none).
func fakeClient() *fake.FakeDynamicClient {
	c := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{inventory.ConfigMaps: "ConfigMapList"})
	n := 0
	c.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n++
		a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured).SetUID(types.UID(fmt.Sprintf("uid-%d", n)))
		return false, nil, nil // on to the tracker
	})
	return c
}

// executor is the inventory's executor over c. These Steps only record
// inventories, so its mapper knows ConfigMaps alone: a Step that reached
// another kind would fail on it.
func executor(inv inventory.Inventory, c *fake.FakeDynamicClient, g *inventory.Generation) *handoff.Executor {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	exec := inv.Executor(c, mapper)
	return exec
}

func stored(t *testing.T, inv inventory.Inventory, c *fake.FakeDynamicClient) []unstructured.Unstructured {
	t.Helper()
	list, err := inv.Sets(c).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].GetName() < list.Items[j].GetName() })
	return list.Items
}

func writes(res handoff.Result) []string {
	var out []string
	for _, w := range res.Writes {
		out = append(out, w.String())
	}
	return out
}

func TestStepCreatesThePartsOnce(t *testing.T) {
	ctx := context.Background()
	inv := inventory.Inventory{Namespace: "ops", Component: "c", MaxBytes: 4096, Probe: readyProbe{}}
	g, err := inv.Generation("v1", configMaps(300))
	if err != nil {
		t.Fatal(err)
	}
	c := fakeClient()
	exec := executor(inv, c, g)

	res, err := exec.Step(ctx, g.Desired)
	if err != nil {
		t.Fatal(err)
	}
	// sha256("v1") starts 3bfc269594.
	want := []string{
		"create configmaps c-inventory-part-0-3bfc269594",
		"create configmaps c-inventory-part-1-3bfc269594",
		"create configmaps c-inventory-part-2-3bfc269594",
	}
	if d := cmp.Diff(want, writes(res)); d != "" {
		t.Fatalf("first Step writes (-want +got):\n%s", d)
	}
	res, err = exec.Step(ctx, g.Desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Writes) != 0 || res.Plan.Phase != handoff.PhaseSteady || res.Requeue {
		t.Errorf("second Step: writes %v, phase %s, requeue %v; want nothing, Steady", writes(res), res.Plan.Phase, res.Requeue)
	}

	items := stored(t, inv, c)
	if len(items) != 3 {
		t.Fatalf("%d ConfigMaps stored, want 3", len(items))
	}
	for i, wantNames := range [][]string{nameRange(0, 145), nameRange(146, 291), nameRange(292, 299)} {
		cm := &items[i]
		if cm.GetNamespace() != "ops" {
			t.Errorf("%s in namespace %q, want ops", cm.GetName(), cm.GetNamespace())
		}
		wantLabels := map[string]string{
			"handoff.kube-handoff.io/inventory":  "c",
			"handoff.kube-handoff.io/set-kind":   "inventory",
			"handoff.kube-handoff.io/generation": "v1",
			"handoff.kube-handoff.io/role":       fmt.Sprintf("part-%d", i),
		}
		if d := cmp.Diff(wantLabels, cm.GetLabels()); d != "" {
			t.Errorf("%s labels (-want +got):\n%s", cm.GetName(), d)
		}
		if got := cm.GetAnnotations()[inventory.CountAnnotation]; got != fmt.Sprint(len(wantNames)) {
			t.Errorf("%s count annotation %q, want %d", cm.GetName(), got, len(wantNames))
		}
		if len(cm.GetOwnerReferences()) != 0 {
			t.Errorf("%s has ownerReferences %v", cm.GetName(), cm.GetOwnerReferences())
		}
		s, err := inv.Family().Observe(cm)
		if err != nil {
			t.Fatalf("Observe %s: %v", cm.GetName(), err)
		}
		if s.Generation != "v1" || s.Role != fmt.Sprintf("part-%d", i) || s.Readiness.State != handoff.Ready {
			t.Errorf("Observe %s: %s %s", cm.GetName(), s, s.Readiness)
		}
		if d := cmp.Diff(wantNames, names(s.Resources)); d != "" {
			t.Errorf("Observe %s resources (-want +got):\n%s", cm.GetName(), d)
		}
	}
}

// knativeLike makes n distinct objects shaped like a large knative
// install: a dozen kinds over core, apps, rbac, autoscaling, policy and
// knative's internal groups, cluster-scoped ones among them, in
// knative-serving and tenant namespaces, with names of 20 to 63
// characters.
func knativeLike(n int) []unstructured.Unstructured {
	kinds := []struct {
		apiVersion, kind string
		cluster          bool
	}{
		{"apps/v1", "Deployment", false},
		{"v1", "Service", false},
		{"v1", "ConfigMap", false},
		{"v1", "Secret", false},
		{"v1", "ServiceAccount", false},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", false},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", true},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", true},
		{"networking.internal.knative.dev/v1alpha1", "Certificate", false},
		{"networking.internal.knative.dev/v1alpha1", "ServerlessService", false},
		{"caching.internal.knative.dev/v1alpha1", "Image", false},
		{"autoscaling/v2", "HorizontalPodAutoscaler", false},
		{"policy/v1", "PodDisruptionBudget", false},
		{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", true},
	}
	words := []string{"activator", "autoscaler", "controller", "webhook", "net-istio-controller", "domain-mapping", "queue-proxy"}
	out := make([]unstructured.Unstructured, n)
	for i := range out {
		k := kinds[i%len(kinds)]
		name := fmt.Sprintf("knative-serving-%s-%05d", words[i%len(words)], i)
		if want := 20 + (i*7)%44; len(name) < want {
			name += "-" + strings.Repeat("x", want-len(name)-1)
		}
		name = name[:min(len(name), 63)]
		ns := "knative-serving"
		if i%3 == 0 {
			ns = fmt.Sprintf("knative-serving-tenant-%02d", i%17)
		}
		if k.cluster {
			ns = ""
		}
		out[i] = obj(k.apiVersion, k.kind, ns, name)
	}
	return out
}

// withManagedFields adds the managedFields entry an API server records for
// a client-side create of cm: every data key once more, as "f:<key>":{}.
func withManagedFields(t *testing.T, cm *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	data := map[string]any{".": map[string]any{}}
	for k := range cm.Object["data"].(map[string]any) {
		data["f:"+k] = map[string]any{}
	}
	fields, err := json.Marshal(map[string]any{"f:data": data})
	if err != nil {
		t.Fatal(err)
	}
	out := cm.DeepCopy()
	out.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: "knative-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields},
	}})
	return out
}

func TestTenThousandReferences(t *testing.T) {
	const n, limit = 10000, 1 << 20
	ctx := context.Background()
	objs := knativeLike(n)
	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving", Probe: readyProbe{}}
	g, err := inv.Generation("1.14.1", objs)
	if err != nil {
		t.Fatal(err)
	}
	c := fakeClient()
	if _, err := executor(inv, c, g).Step(ctx, g.Desired); err != nil {
		t.Fatal(err)
	}
	items := stored(t, inv, c)
	if len(items) != len(g.Desired.Roles) || len(items) < 2 {
		t.Fatalf("%d ConfigMaps for %d roles; 10 000 references need several", len(items), len(g.Desired.Roles))
	}
	got := map[handoff.Ref]string{}
	largest, largestManaged := 0, 0
	for i := range items {
		cm := &items[i]
		raw, err := json.Marshal(cm.Object)
		if err != nil {
			t.Fatal(err)
		}
		managed, err := json.Marshal(withManagedFields(t, cm).Object)
		if err != nil {
			t.Fatal(err)
		}
		largest, largestManaged = max(largest, len(raw)), max(largestManaged, len(managed))
		if len(raw) >= limit || len(managed) >= limit {
			t.Errorf("%s: %d bytes, %d with managedFields; want under %d", cm.GetName(), len(raw), len(managed), limit)
		}
		es, err := inventory.Decode(cm)
		if err != nil {
			t.Fatalf("Decode %s: %v", cm.GetName(), err)
		}
		for _, e := range es {
			if _, dup := got[e.Ref]; dup {
				t.Errorf("%s recorded twice", e.Ref)
			}
			got[e.Ref] = e.APIVersion
		}
	}
	t.Logf("%d references in %d ConfigMaps; largest %d bytes, %d with managedFields", n, len(items), largest, largestManaged)
	want := make(map[handoff.Ref]string, n)
	for i := range objs {
		want[handoff.RefOf(&objs[i])] = objs[i].GetAPIVersion()
	}
	if len(want) != n {
		t.Fatalf("the generator made %d distinct objects, want %d", len(want), n)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("decoded (-input +decoded):\n%s", d)
	}

	// Another order: the same roles, hashes and ConfigMaps.
	shuffled := knativeLike(n)
	rand.New(rand.NewSource(7)).Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	g2, err := inv.Generation("1.14.1", shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(g.Desired, g2.Desired, ignoreBuild); d != "" {
		t.Errorf("shuffled input (-first +shuffled):\n%s", d)
	}
	c2 := fakeClient()
	if _, err := executor(inv, c2, g2).Step(ctx, g2.Desired); err != nil {
		t.Fatal(err)
	}
	items2 := stored(t, inv, c2)
	if len(items2) != len(items) {
		t.Fatalf("%d ConfigMaps from shuffled input, want %d", len(items2), len(items))
	}
	for i := range items {
		// The UIDs differ by creation order; everything else is the same.
		a, b := items[i].DeepCopy(), items2[i].DeepCopy()
		a.SetUID("")
		b.SetUID("")
		if d := cmp.Diff(a.Object, b.Object); d != "" {
			t.Errorf("%s differs (-first +shuffled):\n%s", a.GetName(), d)
		}
	}
}
