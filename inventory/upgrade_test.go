package inventory_test

// In-place generations end to end, on the test kit's cluster (UIDs,
// resourceVersions, finalizers and garbage collection as an API server
// has them): knative/operator's shape, objects applied under the same
// names, namespaced ones controller-owned by the component object.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// rolledOut is an ObjectProbe that reads Deployments only: one is rolled
// out for a set when its "applied" annotation names the set's generation,
// as a rollout of that generation's spec would be.
type rolledOut struct{}

var _ handoff.ObjectProbe = rolledOut{}

func (rolledOut) Ready(*unstructured.Unstructured) handoff.Readiness {
	return handoff.Readiness{State: handoff.NotReady, Reason: "NotRead"}
}

func (rolledOut) Reads(ref handoff.Ref) bool { return ref.Kind == "Deployment" }

func (rolledOut) ReadyFrom(s handoff.Set, live func(handoff.Ref) (*unstructured.Unstructured, error)) handoff.Readiness {
	for _, ref := range s.Resources {
		if ref.Kind != "Deployment" {
			continue
		}
		o, err := live(ref)
		if err != nil {
			return handoff.Readiness{State: handoff.NotReady, Reason: "Missing", Message: err.Error()}
		}
		if got := o.GetAnnotations()["applied"]; got != s.Generation {
			return handoff.Readiness{State: handoff.NotReady, Reason: "Rolling", Message: ref.Name + " at " + got}
		}
	}
	return handoff.Readiness{State: handoff.Ready}
}

const (
	servingNS = "knative-serving"
	crUID     = types.UID("uid-knativeserving")
)

// ownedByCR gives obj a controller ownerReference to the component object
// (a KnativeServing, a kind the cluster does not serve: its garbage
// collector takes such an owner as live).
func ownedByCR(o unstructured.Unstructured) unstructured.Unstructured {
	yes := true
	o = *o.DeepCopy()
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "operator.knative.dev/v1beta1", Kind: "KnativeServing",
		Name: "knative-serving", UID: crUID, Controller: &yes, BlockOwnerDeletion: &yes}})
	return o
}

func annotated(o unstructured.Unstructured, k, v string) unstructured.Unstructured {
	o = *o.DeepCopy()
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[k] = v
	o.SetAnnotations(ann)
	return o
}

type upgrade struct {
	c    *handofftest.Cluster
	inv  inventory.Inventory
	exec *handoff.Executor
}

func newUpgrade(t *testing.T, opts ...handofftest.Option) *upgrade {
	t.Helper()
	c := handofftest.NewCluster(opts...)
	dyn := c.ClientFor("executor")
	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving", Probe: rolledOut{}}
	return &upgrade{c: c, inv: inv, exec: inv.Executor(dyn, c.Mapper(), crUID)}
}

// install seeds objs as the operator applied them.
func (u *upgrade) install(t *testing.T, objs ...unstructured.Unstructured) {
	t.Helper()
	for i := range objs {
		if err := u.c.Add(&objs[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// steps runs Step with the generation of objs until it settles.
func (u *upgrade) steps(t *testing.T, gen string, objs []unstructured.Unstructured, max int) {
	t.Helper()
	g, err := u.inv.Generation(gen, objs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < max; i++ {
		res, err := u.exec.Step(context.Background(), g.Desired)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Requeue {
			return
		}
	}
	t.Fatalf("generation %s not settled after %d steps", gen, max)
}

// inventories returns "name generation" of every inventory ConfigMap
// stored, deleting or not.
func (u *upgrade) inventories(t *testing.T) []string {
	t.Helper()
	var out []string
	sel := labels.SelectorFromSet(u.inv.Family().Selector)
	for _, o := range u.c.Objects() {
		if o.GetKind() == "ConfigMap" && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o.GetName()+" "+o.GetLabels()[inventory.GenerationLabel])
		}
	}
	return out
}

func (u *upgrade) apply(t *testing.T, o unstructured.Unstructured) {
	t.Helper()
	live, ok := u.c.Get(handofftest.KeyOf(&o))
	if !ok {
		t.Fatalf("%s is not there to apply over", handofftest.KeyOf(&o))
	}
	live.SetAnnotations(o.GetAnnotations())
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	if _, err := u.c.ClientFor("operator").Resource(gvr).Namespace(o.GetNamespace()).Update(context.Background(), live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestInPlaceUpgrade(t *testing.T) {
	ctx := context.Background()
	u := newUpgrade(t)
	controller := obj("apps/v1", "Deployment", servingNS, "controller")
	config := ownedByCR(obj("v1", "ConfigMap", servingNS, "config-network"))
	webhook := obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.webhook.serving.knative.dev")
	oldCert := ownedByCR(obj("v1", "Secret", servingNS, "routing-serving-certs"))
	oldRole := obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "knative-serving-certmanager")
	kept := annotated(ownedByCR(obj("v1", "ConfigMap", servingNS, "config-kept")), handoff.DefaultKeepAnnotation, handoff.KeepValue)
	v1 := []unstructured.Unstructured{controller, config, webhook, oldCert, oldRole, kept}
	v2 := []unstructured.Unstructured{controller, config, webhook}

	u.install(t, ownedByCR(annotated(controller, "applied", "v1")), config, webhook, oldCert, oldRole, kept)
	u.steps(t, "v1", v1, 3)
	// sha256("v1") starts 3bfc269594, sha256("v2") fb04dcb697.
	if d := cmp.Diff([]string{"knative-serving-inventory-part-0-3bfc269594 v1"}, u.inventories(t)); d != "" {
		t.Fatalf("inventories after v1 (-want +got):\n%s", d)
	}

	// v2 recorded beside v1; nothing goes while the controller runs v1.
	g2, err := u.inv.Generation("v2", v2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		res, err := u.exec.Step(ctx, g2.Desired)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Plan.Of(handoff.ActionRetire)) > 0 {
			t.Fatalf("step %d retires v1 before v2 rolled out:\n%s", i, res.Plan)
		}
	}
	if d := cmp.Diff([]string{"knative-serving-inventory-part-0-3bfc269594 v1", "knative-serving-inventory-part-0-fb04dcb697 v2"}, u.inventories(t)); d != "" {
		t.Fatalf("inventories while v2 rolls out (-want +got):\n%s", d)
	}
	for _, o := range v1 {
		if !u.c.Exists(handofftest.KeyOf(&o)) {
			t.Fatalf("%s deleted before v2 rolled out", handofftest.KeyOf(&o))
		}
	}

	// The operator applies v2 and it rolls out.
	u.apply(t, annotated(controller, "applied", "v2"))
	before := map[handofftest.Key]*unstructured.Unstructured{}
	for _, o := range v2 {
		k := handofftest.KeyOf(&o)
		before[k], _ = u.c.Get(k)
	}
	keptKey := handofftest.KeyOf(&kept)
	keptBefore, _ := u.c.Get(keptKey)
	u.steps(t, "v2", v2, 6)

	// The kept object, which v2 no longer lists, stays (same UID) and is
	// released from the KnativeServing, so removing it does not take it.
	if now, ok := u.c.Get(keptKey); !ok || now.GetUID() != keptBefore.GetUID() {
		t.Errorf("%s, annotated to be kept, is gone or re-created", keptKey)
	} else if refs := now.GetOwnerReferences(); len(refs) != 0 {
		t.Errorf("%s still owned after v1's retirement: %v", keptKey, refs)
	}

	for _, o := range []unstructured.Unstructured{oldCert, oldRole} {
		if k := handofftest.KeyOf(&o); u.c.Exists(k) {
			t.Errorf("%s, listed by v1 alone, is still there", k)
		}
	}
	for k, was := range before {
		now, ok := u.c.Get(k)
		if !ok {
			t.Errorf("%s is gone", k)
			continue
		}
		if now.GetUID() != was.GetUID() || now.GetResourceVersion() != was.GetResourceVersion() {
			t.Errorf("%s changed: UID %s→%s, resourceVersion %s→%s", k, was.GetUID(), now.GetUID(), was.GetResourceVersion(), now.GetResourceVersion())
		}
		if d := cmp.Diff(was.GetOwnerReferences(), now.GetOwnerReferences()); d != "" {
			t.Errorf("%s ownerReferences (-before +after):\n%s", k, d)
		}
	}
	if d := cmp.Diff([]string{"knative-serving-inventory-part-0-fb04dcb697 v2"}, u.inventories(t)); d != "" {
		t.Errorf("inventories after v2 (-want +got):\n%s", d)
	}
}

// A change within one generation (a target namespace that moves) is an
// update in place of the part it touches: its data and hash change, and
// what it no longer lists is pruned once the set is Ready again.
func TestUpdateInPlace(t *testing.T) {
	u := newUpgrade(t)
	controller := ownedByCR(annotated(obj("apps/v1", "Deployment", servingNS, "controller"), "applied", "v1"))
	before := []unstructured.Unstructured{controller, ownedByCR(obj("v1", "ConfigMap", servingNS, "config-a")), ownedByCR(obj("v1", "ConfigMap", servingNS, "config-b"))}
	moved := ownedByCR(obj("v1", "ConfigMap", "knative-serving-2", "config-b"))
	after := []unstructured.Unstructured{before[0], before[1], moved}
	u.install(t, before...)
	u.steps(t, "v1", before, 3)
	name := "knative-serving-inventory-part-0-3bfc269594"
	first, ok := u.c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: "knative-operator", Name: name})
	if !ok {
		t.Fatalf("%s not created", name)
	}

	u.install(t, moved)
	u.steps(t, "v1", after, 4)
	now, ok := u.c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: "knative-operator", Name: name})
	if !ok {
		t.Fatalf("%s is gone", name)
	}
	if now.GetUID() != first.GetUID() {
		t.Errorf("%s re-created, not updated in place", name)
	}
	wantData := map[string]any{
		"knative-serving_controller_apps_Deployment": "apps/v1",
		"knative-serving_config-a__ConfigMap":        "v1",
		"knative-serving-2_config-b__ConfigMap":      "v1",
	}
	if d := cmp.Diff(wantData, now.Object["data"]); d != "" {
		t.Errorf("data after the update (-want +got):\n%s", d)
	}
	if now.GetAnnotations()[inventory.HashAnnotation] == first.GetAnnotations()[inventory.HashAnnotation] {
		t.Error("hash annotation unchanged")
	}
	if u.c.Exists(handofftest.Key{Kind: "ConfigMap", Namespace: servingNS, Name: "config-b"}) {
		t.Error("config-b in the old namespace, no longer listed, is still there")
	}
	if !u.c.Exists(handofftest.KeyOf(&moved)) {
		t.Error("config-b in the new namespace is gone")
	}
	if v := now.GetAnnotations()[handoff.DroppedAnnotation]; v != "" {
		t.Errorf("dropped record %s left after the prune", v)
	}
}

// What an upgrade's retirement kept, deleted and left, and why, is in the
// Step's Result, resource by resource, as Finalize reports it for a set
// with a controller. Without Owners, the dropped Secret the component owns
// is left, and the Result says so and why (issue 37: it said nothing).
func TestRetirementReportsWhatItLeft(t *testing.T) {
	controller := obj("apps/v1", "Deployment", servingNS, "controller")
	config := ownedByCR(obj("v1", "ConfigMap", servingNS, "config-network"))
	webhook := obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validation.webhook.serving.knative.dev")
	oldCert := ownedByCR(obj("v1", "Secret", servingNS, "routing-serving-certs"))
	oldRole := obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "knative-serving-certmanager")
	kept := annotated(ownedByCR(obj("v1", "ConfigMap", servingNS, "config-kept")), handoff.DefaultKeepAnnotation, handoff.KeepValue)
	podOwned := obj("v1", "Secret", servingNS, "pod-owned")
	podOwned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "some-pod", UID: "uid-some-pod"}})
	v1 := []unstructured.Unstructured{controller, config, webhook, oldCert, oldRole, kept, podOwned}
	v2 := []unstructured.Unstructured{controller, config, webhook}

	// In the order the inventory lists them: by namespace, name, group
	// and kind.
	const successor = "listed by knative-serving-inventory-part-0-fb04dcb697 (v2/part-0)"
	keptItems := []string{
		"Keep ValidatingWebhookConfiguration.admissionregistration.k8s.io validation.webhook.serving.knative.dev: " + successor,
		"Keep ConfigMap knative-serving/config-network: " + successor,
		"Keep Deployment.apps knative-serving/controller: " + successor,
	}
	tests := map[string]struct {
		owners []types.UID
		want   map[string][]string
	}{
		"the component object's UID in Owners": {
			owners: []types.UID{crUID},
			want: map[string][]string{
				"Kept": keptItems,
				// RBAC objects last.
				"Deleted": {
					"Delete Secret knative-serving/routing-serving-certs: installed without an owner, listed by no other set",
					"Delete ClusterRole.rbac.authorization.k8s.io knative-serving-certmanager: installed without an owner, listed by no other set",
				},
				"Skipped": {
					"Skip ConfigMap knative-serving/config-kept: annotated handoff.kube-handoff.io/on-remove=keep (detached)",
					"Skip Secret knative-serving/pod-owned: owned by an object outside the family",
				},
			},
		},
		"no Owners: what the component owns is left, with the reason": {
			want: map[string][]string{
				"Kept": keptItems,
				"Deleted": {
					"Delete ClusterRole.rbac.authorization.k8s.io knative-serving-certmanager: installed without an owner, listed by no other set",
				},
				"Skipped": {
					"Skip ConfigMap knative-serving/config-kept: annotated handoff.kube-handoff.io/on-remove=keep",
					"Skip Secret knative-serving/pod-owned: owned by an object outside the family",
					"Skip Secret knative-serving/routing-serving-certs: owned by an object outside the family",
				},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u := newUpgrade(t)
			u.exec = u.inv.Executor(u.c.ClientFor("executor"), u.c.Mapper(), tc.owners...)
			u.install(t, annotated(controller, "applied", "v1"), config, webhook, oldCert, oldRole, kept, podOwned)
			u.steps(t, "v1", v1, 3)
			g2, err := u.inv.Generation("v2", v2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := u.exec.Step(ctx, g2.Desired); err != nil {
				t.Fatal(err)
			}
			u.apply(t, annotated(controller, "applied", "v2"))
			got := map[string][]string{}
			add := func(field string, items []handoff.Item) {
				for _, it := range items {
					s := it.String()
					if it.Detached {
						s += " (detached)"
					}
					got[field] = append(got[field], s)
				}
			}
			for i := 0; ; i++ {
				if i == 6 {
					t.Fatal("v2 not settled after 6 steps")
				}
				res, err := u.exec.Step(ctx, g2.Desired)
				if err != nil {
					t.Fatal(err)
				}
				add("Deleted", res.Deleted)
				add("Collected", res.Collected)
				add("HandedOver", res.HandedOver)
				add("Kept", res.Kept)
				add("Skipped", res.Skipped)
				add("Unserved", res.Unserved)
				if !res.Requeue {
					break
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("what the retirement reported (-want +got):\n%s", d)
			}
			// What the Result says is what happened.
			for _, o := range []unstructured.Unstructured{oldCert, oldRole, kept, podOwned} {
				k := handofftest.KeyOf(&o)
				deleted := slices.ContainsFunc(got["Deleted"], func(s string) bool { return strings.HasPrefix(s, "Delete "+handoff.RefOf(&o).String()+":") })
				if exists := u.c.Exists(k); deleted == exists {
					t.Errorf("%s: reported deleted %v, still there %v", k, deleted, exists)
				}
			}
		})
	}
}

// A dry run lists every write the Step would make: for the retirement of
// an inventory (no finalizer of its own), the finalizer it gets, its
// delete, the deletes of what only it listed and the finalizer's removal,
// as the real Step then makes them; and it writes nothing.
func TestDryRunListsARetirementsDeletes(t *testing.T) {
	ctx := context.Background()
	u := newUpgrade(t)
	controller := obj("apps/v1", "Deployment", servingNS, "controller")
	oldCert := ownedByCR(obj("v1", "Secret", servingNS, "routing-serving-certs"))
	oldRole := obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "knative-serving-certmanager")
	v1 := []unstructured.Unstructured{controller, oldCert, oldRole}
	v2 := []unstructured.Unstructured{controller}
	u.install(t, ownedByCR(annotated(controller, "applied", "v1")), oldCert, oldRole)
	u.steps(t, "v1", v1, 3)
	g2, err := u.inv.Generation("v2", v2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.exec.Step(ctx, g2.Desired); err != nil { // records v2
		t.Fatal(err)
	}
	u.apply(t, annotated(controller, "applied", "v2"))

	dry := *u.exec
	dry.DryRun = true
	n := len(u.c.Writes())
	planned, err := dry.Step(ctx, g2.Desired)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(u.c.Writes()); got != n {
		t.Fatalf("the dry run wrote %d times", got-n)
	}
	// sha256("v1") starts 3bfc269594.
	old := "knative-serving-inventory-part-0-3bfc269594"
	want := []string{
		"patch configmaps " + old,
		"delete configmaps " + old,
		"delete secrets knative-serving/routing-serving-certs",
		"delete clusterroles knative-serving-certmanager", // RBAC last
		"update configmaps " + old,
	}
	if d := cmp.Diff(want, writes(planned)); d != "" {
		t.Errorf("dry run writes (-want +got):\n%s", d)
	}
	done, err := u.exec.Step(ctx, g2.Desired)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(writes(done), writes(planned)); d != "" {
		t.Errorf("dry run writes (-real Step +dry run):\n%s", d)
	}
	for _, o := range []unstructured.Unstructured{oldCert, oldRole} {
		if u.c.Exists(handofftest.KeyOf(&o)) {
			t.Errorf("%s, listed by v1 alone, is still there", handofftest.KeyOf(&o))
		}
	}
}

// movedConfigMaps returns n ConfigMaps in namespace ns, owned by the
// component object.
func movedConfigMaps(ns string, n int) []unstructured.Unstructured {
	out := make([]unstructured.Unstructured, n)
	for i := range out {
		out[i] = ownedByCR(obj("v1", "ConfigMap", ns, fmt.Sprintf("config-observability-defaults-%04d", i)))
	}
	return out
}

// An update in place that moves a part of 3 000 entries to another
// namespace: the record of what it drops would take some 300 KiB as an
// annotation, more than the API server takes for all of an object's
// annotations. It is kept in ConfigMaps of its own: the update goes
// through, the old namespace's objects go once the part is Ready again,
// and then the record goes too.
func TestUpdateInPlaceMovesALargePart(t *testing.T) {
	// (Nothing here is collected: the component object owns everything.
	// A pass after each of 3 000 deletes would cost half a minute.)
	u := newUpgrade(t, handofftest.WithoutAutoGC())
	before := movedConfigMaps(servingNS, 3000)
	after := movedConfigMaps("knative-serving-2", 3000)
	u.install(t, before...)
	u.steps(t, "v1", before, 3)
	if got := len(u.inventories(t)); got != 1 {
		t.Fatalf("%d inventories for v1, want 1", got)
	}
	u.install(t, after...)
	start := u.c.Now()
	u.steps(t, "v1", after, 6)

	// sha256("v1") starts 3bfc269594.
	if d := cmp.Diff([]string{"knative-serving-inventory-part-0-3bfc269594 v1"}, u.inventories(t)); d != "" {
		t.Errorf("inventories after the move (-want +got):\n%s", d)
	}
	part, _ := u.c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: "knative-operator", Name: "knative-serving-inventory-part-0-3bfc269594"})
	if v := part.GetAnnotations()[handoff.DroppedAnnotation]; v != "" {
		t.Errorf("the part records %d bytes of dropped resources", len(v))
	}
	for i := range before {
		if k := handofftest.KeyOf(&before[i]); u.c.Exists(k) {
			t.Fatalf("%s, no longer listed, is still there", k)
		}
	}
	if gaps := u.c.Gaps(keysOf(after), start, u.c.Now()); len(gaps) != 0 {
		t.Errorf("the moved objects were absent: %v", gaps[0])
	}
	// The record took ConfigMaps of the generation, each within the
	// budget, which were created before the update and retired after it.
	records := 0
	for _, w := range u.c.Writes() {
		if w.Key.Namespace == "knative-operator" && strings.Contains(w.Key.Name, "-inventory-"+handoff.DroppedRolePrefix) && w.Verb == "create" {
			records++
		}
	}
	if records == 0 {
		t.Error("no record of what the update dropped was made")
	}
}

// A part that a version before records in sets wrote with the record of
// what an update dropped in DroppedAnnotation (JSON of references) is
// still pruned: the objects go once the part is Ready, and the
// annotation is cleared.
func TestUpdateInPlacePrunesALegacyRecord(t *testing.T) {
	u := newUpgrade(t)
	kept := ownedByCR(obj("v1", "ConfigMap", servingNS, "config-a"))
	gone := ownedByCR(obj("v1", "ConfigMap", servingNS, "config-b"))
	u.install(t, kept, gone)
	u.steps(t, "v1", []unstructured.Unstructured{kept}, 3)
	name := "knative-serving-inventory-part-0-3bfc269594"
	part, ok := u.c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: "knative-operator", Name: name})
	if !ok {
		t.Fatalf("%s not created", name)
	}
	// As the previous version wrote it after an update that dropped
	// config-b.
	legacy := fmt.Sprintf(`[{"Group":"","Kind":"ConfigMap","Namespace":%q,"Name":"config-b"}]`, servingNS)
	part.SetAnnotations(map[string]string{handoff.DroppedAnnotation: legacy})
	cms := u.c.ClientFor("previous-version").Resource(inventory.ConfigMaps).Namespace("knative-operator")
	if _, err := cms.Update(context.Background(), part, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u.steps(t, "v1", []unstructured.Unstructured{kept}, 3)
	if u.c.Exists(handofftest.KeyOf(&gone)) {
		t.Error("config-b, recorded as dropped, is still there")
	}
	if !u.c.Exists(handofftest.KeyOf(&kept)) {
		t.Error("config-a is gone")
	}
	if part, _ := u.c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: "knative-operator", Name: name}); part.GetAnnotations()[handoff.DroppedAnnotation] != "" {
		t.Error("the legacy record was not cleared")
	}
}

func keysOf(objs []unstructured.Unstructured) []handofftest.Key {
	out := make([]handofftest.Key, len(objs))
	for i := range objs {
		out[i] = handofftest.KeyOf(&objs[i])
	}
	return out
}
