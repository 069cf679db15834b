package inventory_test

// The record of what an update in place drops from a part, kept in
// ConfigMaps of its own (handoff.Family.DroppedSets), on the test kit's
// cluster.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// records returns the record ConfigMaps stored, by name.
func records(u *upgrade) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range u.c.Objects() {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetLabels()[handoff.DefaultRoleLabel], handoff.DroppedRolePrefix) {
			out[o.GetName()] = o
		}
	}
	return out
}

// moveSetup records v1 (300 ConfigMaps in knative-serving, three parts of
// 4 KiB) and returns the generation moved to knative-serving-2, its
// objects installed.
func moveSetup(t *testing.T) (*upgrade, []unstructured.Unstructured, []unstructured.Unstructured, *inventory.Generation) {
	t.Helper()
	u := newUpgrade(t, handofftest.WithoutAutoGC())
	u.inv.MaxBytes = inventory.MinMaxBytes
	u.exec.Family = u.inv.Family()
	before, after := movedConfigMaps(servingNS, 300), movedConfigMaps("knative-serving-2", 300)
	u.install(t, before...)
	u.steps(t, "v1", before, 3)
	u.install(t, after...)
	g, err := u.inv.Generation("v1", after)
	if err != nil {
		t.Fatal(err)
	}
	u.exec.Build = g.Build
	return u, before, after, g
}

// An update in place records what it drops from each part in ConfigMaps
// of the generation, made before the update, within the budget of a part,
// listing exactly what the part dropped, superseded by the generation; a
// dry run lists them; they retire once the parts are Ready again, and
// their retirement deletes what no part lists any more.
func TestUpdateInPlaceRecordsInSets(t *testing.T) {
	ctx := context.Background()
	u, before, _, g := moveSetup(t)
	dry := *u.exec
	dry.DryRun = true
	n := len(u.c.Writes())
	planned, err := dry.Step(ctx, g.Desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.c.Writes()) != n {
		t.Fatal("the dry run wrote")
	}
	res, err := u.exec.Step(ctx, g.Desired)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(writes(res), writes(planned)); d != "" {
		t.Errorf("dry run writes (-real Step +dry run):\n%s", d)
	}
	// Each part's update comes after the records of what it drops.
	var order []string
	for _, w := range writes(res) {
		switch {
		case strings.HasPrefix(w, "create configmaps knative-serving-inventory-"+handoff.DroppedRolePrefix):
			order = append(order, "record")
		case strings.HasPrefix(w, "update configmaps knative-serving-inventory-part-"):
			order = append(order, "update")
		}
	}
	if len(order) < 6 || order[0] != "record" || order[len(order)-1] != "update" {
		t.Errorf("writes %v, want records then updates, part by part", order)
	}

	recs := records(u)
	var listed []handoff.Ref
	for name, cm := range recs {
		if got := cm.GetLabels()[inventory.GenerationLabel]; got != "v1" {
			t.Errorf("record %s of generation %q, want v1", name, got)
		}
		if got := cm.GetAnnotations()[handoff.DefaultSupersededAnnotation]; got != "v1" {
			t.Errorf("record %s superseded by %q, want v1", name, got)
		}
		data := cm.Object["data"].(map[string]any)
		size := 2
		for k, v := range data {
			size += len(k) + len(v.(string)) + 6
		}
		if size > inventory.MinMaxBytes {
			t.Errorf("record %s holds %d bytes, over the budget of %d", name, size, inventory.MinMaxBytes)
		}
		refs, err := inventory.Resources(cm)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, refs...)
	}
	if len(listed) != len(before) {
		t.Errorf("the records list %d objects, want the %d the parts dropped", len(listed), len(before))
	}
	for _, ref := range listed {
		if ref.Namespace != servingNS {
			t.Errorf("a record lists %s, which no part dropped", ref)
		}
	}
	for _, o := range before {
		if !u.c.Exists(handofftest.KeyOf(&o)) {
			t.Fatalf("%s deleted before the parts are Ready again", handofftest.KeyOf(&o))
		}
	}

	for i := 0; i < 4; i++ {
		if res, err = u.exec.Step(ctx, g.Desired); err != nil {
			t.Fatal(err)
		}
	}
	if res.Requeue {
		t.Fatalf("not settled:\n%s", res.Plan)
	}
	if recs := records(u); len(recs) != 0 {
		t.Errorf("%d records left after the move settled", len(recs))
	}
	for _, o := range before {
		if u.c.Exists(handofftest.KeyOf(&o)) {
			t.Errorf("%s, no longer listed, is still there", handofftest.KeyOf(&o))
		}
	}
}

// An update that fails after its records were made (the API server did
// not take it) is made again by the next Step, which finds its records
// and makes no others.
func TestUpdateInPlaceRecordsOnce(t *testing.T) {
	ctx := context.Background()
	u, _, _, g := moveSetup(t)
	updates := 0
	u.c.InjectFaults(func(c handofftest.Call) handofftest.Fault {
		if c.Verb == "update" && strings.Contains(c.Name, "-part-") {
			if updates++; updates == 1 {
				return handofftest.Fault{Mode: handofftest.BeforeCommit, Err: apierrors.NewServiceUnavailable("try again")}
			}
		}
		return handofftest.Fault{}
	}, "executor")
	if _, err := u.exec.Step(ctx, g.Desired); err == nil {
		t.Fatal("the Step with a failed update succeeded")
	}
	first := records(u)
	if len(first) == 0 {
		t.Fatal("no records made before the failed update")
	}
	if _, err := u.exec.Step(ctx, g.Desired); err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, w := range u.c.Writes() {
		if w.Verb == "create" && strings.Contains(w.Key.Name, "-inventory-"+handoff.DroppedRolePrefix) {
			made = append(made, w.Key.Name)
		}
	}
	if n := len(records(u)); n != len(made) {
		t.Errorf("%d records stored, %d made: %v", n, len(made), made)
	}
	for name, was := range first {
		if now, ok := records(u)[name]; !ok || now.GetUID() != was.GetUID() {
			t.Errorf("record %s made before the failed update was replaced", name)
		}
	}
}

// A record's name held by another object (a record of the same content,
// still being finalized) makes the update record under another name; it
// neither fails for good nor takes the object being finalized as its
// record.
func TestUpdateInPlaceRecordsBesideAFinalizingRecord(t *testing.T) {
	ctx := context.Background()
	u, _, _, g := moveSetup(t)
	dry := *u.exec
	dry.DryRun = true
	planned, err := dry.Step(ctx, g.Desired)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, w := range writes(planned) {
		if n, ok := strings.CutPrefix(w, "create configmaps "); ok {
			name = n
			break
		}
	}
	if name == "" {
		t.Fatalf("the dry run makes no record: %v", writes(planned))
	}
	// A record of that name, held in deletion by someone's finalizer.
	held := obj("v1", "ConfigMap", "knative-operator", name)
	fam := u.inv.Family()
	lbls := map[string]string{inventory.GenerationLabel: "v1", handoff.DefaultRoleLabel: handoff.DroppedRolePrefix + "held"}
	for k, v := range fam.Selector {
		lbls[k] = v
	}
	held.SetLabels(lbls)
	held.SetFinalizers([]string{"example.com/hold"})
	now := metav1.NewTime(u.c.Now())
	held.SetDeletionTimestamp(&now)
	if err := u.c.Add(&held); err != nil {
		t.Fatal(err)
	}
	res, err := u.exec.Step(ctx, g.Desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Of(handoff.ActionUpdate)) == 0 {
		t.Fatalf("no update planned:\n%s", res.Plan)
	}
	recs := records(u)
	if len(recs) < 2 {
		t.Errorf("%d records, want the one held and those of the update", len(recs))
	}
	if got := recs[name]; got == nil || got.GetDeletionTimestamp() == nil || got.Object["data"] != nil {
		t.Errorf("the record held in deletion was written: %v", got)
	}
	// Once its finalizer goes, everything settles.
	live, _ := u.c.Get(handofftest.KeyOf(&held))
	live.SetFinalizers(nil)
	if _, err := u.c.ClientFor("someone").Resource(inventory.ConfigMaps).Namespace("knative-operator").Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if res, err = u.exec.Step(ctx, g.Desired); err != nil {
			t.Fatal(err)
		}
	}
	if res.Requeue || len(records(u)) != 0 {
		t.Errorf("not settled, %d records left:\n%s", len(records(u)), res.Plan)
	}
}

// A DroppedSets that records what the update does not drop, or leaves out
// what it does, is refused with ErrInvalidFamily, before anything is
// written.
func TestDroppedSetsContract(t *testing.T) {
	ctx := context.Background()
	stranger := handoff.Ref{Kind: "Secret", Namespace: servingNS, Name: "not-dropped"}
	tests := map[string]func(set *unstructured.Unstructured, dropped []handoff.Ref) ([]*unstructured.Unstructured, error){
		"a record of what is not dropped": func(set *unstructured.Unstructured, dropped []handoff.Ref) ([]*unstructured.Unstructured, error) {
			cm := obj("v1", "ConfigMap", "knative-operator", "")
			cm.Object["data"] = map[string]any{inventory.Entry{Ref: stranger}.Key(): "v1"}
			return []*unstructured.Unstructured{&cm}, nil
		},
		"a record of nothing": func(*unstructured.Unstructured, []handoff.Ref) ([]*unstructured.Unstructured, error) {
			return nil, nil
		},
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			u, _, _, g := moveSetup(t)
			u.exec.Family.DroppedSets = fn
			n := len(u.c.Writes())
			_, err := u.exec.Step(ctx, g.Desired)
			var se *handoff.SetError
			if !errors.Is(err, handoff.ErrInvalidFamily) || !errors.As(err, &se) || !strings.Contains(se.Name, "-part-") {
				t.Errorf("Step() = %v, want ErrInvalidFamily naming a part", err)
			}
			if got := len(u.c.Writes()); got != n {
				t.Errorf("%d writes made", got-n)
			}
		})
	}
}
