package handoff_test

// Regression tests for the ways a kept resource was lost to the garbage
// collector or a finalizer (issue 13, items 1-4, 6-8): each scenario is
// seeded on the fake cluster exactly as it stood when the resource was
// lost, then the executor runs, the garbage collector catches up, and the
// test asserts what must still be there.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// setKind is the set kind of these fixtures, tektoncd/operator's.
const setKind = "TektonInstallerSet"

var widgets = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}

// fixture is a fake cluster holding sets seeded by hand, and an executor
// for their family. Nothing runs a set controller: what happens is the
// executor's doing and the garbage collector's.
type fixture struct {
	c    *handofftest.Cluster
	fam  handoff.Family
	exec *handoff.Executor
}

func newFixture(t *testing.T, opts ...handofftest.Option) *fixture {
	t.Helper()
	c := handofftest.NewCluster(opts...)
	c.Register(handofftest.SetResource, setKind, false)
	fam := handoff.Family{
		Resource:        handofftest.SetResource,
		Kind:            setKind,
		Selector:        map[string]string{"operator.tekton.dev/created-by": "Comp", "operator.tekton.dev/type": "main"},
		GenerationLabel: "operator.tekton.dev/release-version",
		NamePrefix:      "comp-main-",
	}
	return &fixture{c: c, fam: fam, exec: &handoff.Executor{
		Family: fam, Dynamic: c.ClientFor("executor"), Mapper: c.Mapper(),
		Prune: handoff.DefaultPruneOptions(), RoleOrder: []string{"static", "deployment"},
		Build: func(_ context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
			// The sets are seeded: a Step that builds one is a test's bug.
			return nil, fmt.Errorf("the fixture builds no set (%s/%s)", d.Generation, r.Name)
		},
	}}
}

// setSpec describes one seeded set.
type setSpec struct {
	name, gen, role string
	age             int    // creationTimestamp is age minutes before 2025-01-01
	ready           bool   // Ready=True for its generation
	supersededBy    string // the superseded annotation
	lists           []*unstructured.Unstructured
}

func (f *fixture) setObject(s setSpec) *unstructured.Unstructured {
	items := make([]any, 0, len(s.lists))
	for _, m := range s.lists {
		items = append(items, m.DeepCopy().Object)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": handofftest.SetResource.GroupVersion().String(), "kind": setKind,
		"spec": map[string]any{"manifests": items},
	}}
	u.SetName(s.name)
	u.SetUID(types.UID("uid-" + s.name))
	u.SetGeneration(1)
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(s.age) * time.Minute)))
	lbls := map[string]string{f.fam.GenerationLabel: s.gen}
	for k, v := range f.fam.Selector {
		lbls[k] = v
	}
	if s.role != "" {
		lbls[handoff.DefaultRoleLabel] = s.role
	}
	u.SetLabels(lbls)
	if s.supersededBy != "" {
		u.SetAnnotations(map[string]string{handoff.DefaultSupersededAnnotation: s.supersededBy})
	}
	if s.ready {
		u.Object["status"] = map[string]any{"observedGeneration": int64(1),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	}
	return u
}

// seed stores the sets and the objects; each object named in owners gets a
// controller ownerReference to that set.
func (f *fixture) seed(t *testing.T, sets []setSpec, objs []*unstructured.Unstructured, owners map[string]string) {
	t.Helper()
	for _, s := range sets {
		if err := f.c.Add(f.setObject(s)); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		o = o.DeepCopy()
		if set, ok := owners[o.GetName()]; ok {
			o.SetOwnerReferences([]metav1.OwnerReference{f.fam.OwnerReference(handoff.Set{Name: set, UID: types.UID("uid-" + set)})})
		}
		if err := f.c.Add(o); err != nil {
			t.Fatal(err)
		}
	}
}

// owners returns the names of the owners of the stored object, or nil and
// false when it is gone.
func (f *fixture) owners(k handofftest.Key) ([]string, bool) {
	o, ok := f.c.Get(k)
	if !ok {
		return nil, false
	}
	var out []string
	for _, r := range o.GetOwnerReferences() {
		out = append(out, r.Name)
	}
	return out, true
}

// steps runs Steps of desired until the plan is settled or n Steps ran,
// with ready called after each Step to report sets Ready as their
// controller would; it returns the first error.
func (f *fixture) steps(t *testing.T, desired *handoff.Desired, n int, after func()) error {
	t.Helper()
	for range n {
		res, err := f.exec.Step(context.Background(), desired)
		if err != nil {
			return err
		}
		if after != nil {
			after()
		}
		if !res.Requeue {
			return nil
		}
	}
	return fmt.Errorf("not settled after %d steps", n)
}

func cmKey(name string) handofftest.Key {
	return handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: name}
}

func cm(name string) *unstructured.Unstructured { return mkObj("v1", "ConfigMap", testNS, name, "") }

func desired(gen string, roles ...string) *handoff.Desired {
	d := &handoff.Desired{Generation: gen}
	for _, r := range roles {
		d.Roles = append(d.Roles, handoff.Role{Name: r})
	}
	return d
}

// markReady gives the set Ready=True for its current generation and takes
// the superseded mark off, as its controller does after a release.
func (f *fixture) markReady(t *testing.T, name string) {
	t.Helper()
	sets := f.c.ClientFor("controller").Resource(handofftest.SetResource)
	live, err := sets.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.Object["status"] = map[string]any{"observedGeneration": live.GetGeneration(),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	if _, err := sets.UpdateStatus(context.Background(), live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A retire of a Step hands a shared resource to a set the same Step has
// already retired: the garbage collector then takes the resource (item 1).
func TestStepHandsNothingToASetItRetired(t *testing.T) {
	t.Run("legacy duplicates of the desired role beside the old generation", func(t *testing.T) {
		f := newFixture(t) // the garbage collector runs after every write
		shared := cm("shared")
		f.seed(t, []setSpec{
			{name: "static-v1", gen: "v1", role: "static", age: 30, ready: true, lists: []*unstructured.Unstructured{shared}},
			{name: "static-v2-a", gen: "v2", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{shared}},
			{name: "static-v2-b", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{shared}},
		}, []*unstructured.Unstructured{shared}, map[string]string{"shared": "static-v1"})
		if err := f.steps(t, desired("v2", "static"), 5, nil); err != nil {
			t.Fatal(err)
		}
		got, ok := f.owners(cmKey("shared"))
		if !ok {
			t.Fatal("the shared ConfigMap was deleted")
		}
		if diff := cmp.Diff([]string{"static-v2-a"}, got); diff != "" {
			t.Errorf("owner of the shared ConfigMap (-want +got):\n%s", diff)
		}
	})
	t.Run("rollback, with the garbage collector lagging the executor", func(t *testing.T) {
		f := newFixture(t, handofftest.WithoutAutoGC())
		shared := cm("shared")
		f.seed(t, []setSpec{
			{name: "static-v1", gen: "v1", role: "static", age: 30, ready: true, supersededBy: "v2", lists: []*unstructured.Unstructured{shared}},
			{name: "static-v2", gen: "v2", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{shared}},
			{name: "deployment-v2", gen: "v2", role: "deployment", age: 10, ready: true, lists: []*unstructured.Unstructured{shared}},
		}, []*unstructured.Unstructured{shared}, map[string]string{"shared": "static-v2"})
		// Between Steps the garbage collector catches up, and the
		// controller reports static-v1 Ready again once released.
		after := func() {
			f.c.CollectGarbage()
			if o, ok := f.c.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "static-v1"}); ok &&
				o.GetAnnotations()[handoff.DefaultSupersededAnnotation] == "" {
				f.markReady(t, "static-v1")
			}
		}
		if err := f.steps(t, desired("v1", "static"), 6, after); err != nil {
			t.Fatal(err)
		}
		f.c.CollectGarbage()
		got, ok := f.owners(cmKey("shared"))
		if !ok {
			t.Fatal("the shared ConfigMap was deleted")
		}
		if diff := cmp.Diff([]string{"static-v1"}, got); diff != "" {
			t.Errorf("owner of the shared ConfigMap (-want +got):\n%s", diff)
		}
	})
}

// A protected or keep-annotated object that names the retiring set must
// stop naming it before the set goes, or the garbage collector deletes it
// (item 2); the executor's retire and Finalize both see to it.
func TestKeptObjectsStopNamingTheRetiringSet(t *testing.T) {
	pvc := mkObj("v1", "PersistentVolumeClaim", testNS, "data", "")
	kept := cm("kept")
	kept.SetAnnotations(map[string]string{handoff.DefaultKeepAnnotation: handoff.KeepValue})
	obsolete := cm("obsolete")
	v1 := []*unstructured.Unstructured{pvc, kept, obsolete}
	owned := map[string]string{"data": "static-v1", "kept": "static-v1", "obsolete": "static-v1"}
	pvcKey := handofftest.Key{Kind: "PersistentVolumeClaim", Namespace: testNS, Name: "data"}

	for name, tc := range map[string]struct {
		propagation metav1.DeletionPropagation
		desired     *handoff.Desired // nil: removal
	}{
		"upgrade, Foreground retirement": {metav1.DeletePropagationForeground, desired("v2", "static")},
		"upgrade, Background retirement": {metav1.DeletePropagationBackground, desired("v2", "static")},
		"removal, Foreground retirement": {metav1.DeletePropagationForeground, nil},
		"removal, Background retirement": {metav1.DeletePropagationBackground, nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.exec.Propagation = tc.propagation
			f.seed(t, []setSpec{
				{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: v1},
				{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true},
			}, v1, owned)
			if err := f.steps(t, tc.desired, 5, nil); err != nil {
				t.Fatal(err)
			}
			f.c.CollectGarbage()
			for _, k := range []handofftest.Key{pvcKey, cmKey("kept")} {
				got, ok := f.owners(k)
				if !ok {
					t.Errorf("%s was deleted", k)
					continue
				}
				if len(got) != 0 {
					t.Errorf("%s still names %v", k, got)
				}
			}
			if f.c.Exists(cmKey("obsolete")) {
				t.Errorf("the obsolete ConfigMap owned by static-v1 alone was not collected")
			}
		})
	}

	t.Run("Finalize of a set deleted by someone else", func(t *testing.T) {
		f := newFixture(t)
		f.seed(t, []setSpec{{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: v1}}, v1, owned)
		set, _ := f.c.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "static-v1"})
		res, err := f.exec.Finalize(context.Background(), set)
		if err != nil {
			t.Fatal(err)
		}
		var detached []string
		for _, it := range res.Skipped {
			if it.Detached {
				detached = append(detached, it.Ref.Name)
			}
		}
		if diff := cmp.Diff([]string{"data", "kept"}, detached); diff != "" {
			t.Errorf("detached items (-want +got):\n%s", diff)
		}
		if err := f.c.Dynamic().Resource(handofftest.SetResource).Delete(context.Background(), "static-v1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.c.CollectGarbage()
		for _, k := range []handofftest.Key{pvcKey, cmKey("kept")} {
			if !f.c.Exists(k) {
				t.Errorf("%s was deleted", k)
			}
		}
		if f.c.Exists(cmKey("obsolete")) {
			t.Errorf("Finalize did not delete the obsolete ConfigMap")
		}
	})
}

// staticMapper is a discovery cache: it answers from what it knew when it
// was filled, and from full once reset.
type staticMapper struct {
	meta.RESTMapper
	full meta.RESTMapper
}

func (m *staticMapper) Reset() { m.RESTMapper = m.full }

// TestStaleMapper: a NoMatch from a mapper that filled its cache before a
// CRD was served must not read as "nothing to hand over" (item 3).
func TestStaleMapper(t *testing.T) {
	widget := mkObj("example.dev/v1", "Widget", testNS, "w", "")
	for name, tc := range map[string]struct {
		mapper    func(before, after meta.RESTMapper) meta.RESTMapper
		served    bool
		wantErr   error // nil: the handoff goes through
		wantOwner string
	}{
		"a mapper that cannot be reset stops the retirement": {
			mapper:  func(before, _ meta.RESTMapper) meta.RESTMapper { return before },
			served:  true,
			wantErr: handoff.ErrStaleMapper,
		},
		"a resettable mapper is reset and the Widget handed over": {
			mapper: func(before, after meta.RESTMapper) meta.RESTMapper {
				return &staticMapper{RESTMapper: before, full: after}
			},
			served:    true,
			wantOwner: "static-v2",
		},
		"a kind unknown after a reset, which a live set lists, stops the retirement: it is never skipped in silence": {
			mapper: func(before, after meta.RESTMapper) meta.RESTMapper {
				return &staticMapper{RESTMapper: before, full: after}
			},
			wantErr: handoff.ErrNotServed,
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			// A discovery cache filled before the Widget CRD was served.
			before := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, handofftest.SetResource.GroupVersion()})
			before.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
			before.Add(handofftest.SetResource.GroupVersion().WithKind(setKind), meta.RESTScopeRoot)
			lists := []*unstructured.Unstructured{cm("shared")}
			if tc.served {
				f.c.Register(widgets, "Widget", true)
				lists = append(lists, widget)
			}
			after := meta.NewDefaultRESTMapper([]schema.GroupVersion{widgets.GroupVersion()})
			after.Add(widgets.GroupVersion().WithKind("Widget"), meta.RESTScopeNamespace)
			if !tc.served {
				after = before
			}
			f.exec.Mapper = tc.mapper(before, meta.MultiRESTMapper{before, after})
			v1 := []*unstructured.Unstructured{cm("shared"), widget}
			f.seed(t, []setSpec{
				{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: v1},
				{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: v1},
			}, lists, map[string]string{"shared": "static-v1", "w": "static-v1"})
			err := f.steps(t, desired("v2", "static"), 5, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Step error = %v, want %v", err, tc.wantErr)
			}
			v1Key := handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "static-v1"}
			if tc.wantErr != nil {
				if !f.c.Exists(v1Key) {
					t.Errorf("static-v1 was retired although a listed kind could not be resolved")
				}
				if n := len(writesBy(f.c, handofftest.GCActor)); n != 0 {
					t.Errorf("the garbage collector wrote %d times; nothing may be collected", n)
				}
				return
			}
			if f.c.Exists(v1Key) {
				t.Errorf("static-v1 was not retired")
			}
			if !tc.served {
				return
			}
			got, ok := f.owners(handofftest.Key{Group: "example.dev", Kind: "Widget", Namespace: testNS, Name: "w"})
			if !ok {
				t.Fatal("the shared Widget was deleted")
			}
			if diff := cmp.Diff([]string{tc.wantOwner}, got); diff != "" {
				t.Errorf("Widget owners (-want +got):\n%s", diff)
			}
		})
	}
}

func writesBy(c *handofftest.Cluster, actor string) []handofftest.Write {
	var out []handofftest.Write
	for _, w := range c.Writes() {
		if w.Actor == actor {
			out = append(out, w)
		}
	}
	return out
}

// One set of the family that cannot be read must not stop the others, and
// must never be deleted; what it can be read to list is kept (item 4).
func TestUnreadableSetBlocksOnlyItself(t *testing.T) {
	shared, listed := cm("shared"), cm("listed-by-the-unreadable-set")
	bad := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"} // no name
	seedAll := func(t *testing.T, f *fixture) *unstructured.Unstructured {
		t.Helper()
		f.seed(t, []setSpec{
			{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{shared, listed}},
			{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{shared}},
		}, []*unstructured.Unstructured{shared, listed}, map[string]string{"shared": "static-v1", "listed-by-the-unreadable-set": "static-v1"})
		// No role label, no RoleOf, and a manifest without a name.
		u := f.setObject(setSpec{name: "mystery", gen: "v1", age: 5, lists: []*unstructured.Unstructured{listed}})
		items := u.Object["spec"].(map[string]any)["manifests"].([]any)
		u.Object["spec"].(map[string]any)["manifests"] = append(items, bad)
		if err := f.c.Add(u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	mysteryKey := handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "mystery"}

	t.Run("Step carries out the plan for the other sets and names the unreadable one", func(t *testing.T) {
		f := newFixture(t)
		seedAll(t, f)
		res, err := f.exec.Step(context.Background(), desired("v2", "static"))
		var se *handoff.SetError
		if !errors.Is(err, handoff.ErrInvalidSet) || !errors.As(err, &se) || se.Name != "mystery" {
			t.Fatalf("Step error = %v, want an ErrInvalidSet naming set mystery", err)
		}
		if len(res.Invalid) != 1 || res.Invalid[0].Name != "mystery" {
			t.Errorf("Result.Invalid = %v, want [mystery]", res.Invalid)
		}
		if got := res.Plan.Of(handoff.ActionRetire); len(got) != 1 || got[0].Set != "static-v1" {
			t.Errorf("retirements = %v, want static-v1 alone", got)
		}
		if !f.c.Exists(mysteryKey) {
			t.Errorf("the unreadable set was deleted")
		}
		got, ok := f.owners(cmKey("listed-by-the-unreadable-set"))
		if !ok {
			t.Fatal("a ConfigMap the unreadable set lists was deleted")
		}
		if diff := cmp.Diff([]string{"mystery"}, got); diff != "" {
			t.Errorf("owners of the ConfigMap the unreadable set lists (-want +got):\n%s", diff)
		}
		if _, ok := f.owners(cmKey("shared")); !ok {
			t.Errorf("the shared ConfigMap was deleted")
		}
	})
	t.Run("Finalize of the unreadable set fails and deletes nothing", func(t *testing.T) {
		f := newFixture(t)
		u := seedAll(t, f)
		_, err := f.exec.Finalize(context.Background(), u)
		if !errors.Is(err, handoff.ErrInvalidSet) {
			t.Fatalf("Finalize error = %v, want ErrInvalidSet", err)
		}
		if n := len(writesBy(f.c, "executor")); n != 0 {
			t.Errorf("Finalize of the unreadable set made %d writes", n)
		}
	})
}

// Kinds are cluster-scoped by what the cluster serves, not by a fixed
// list: a cluster-scoped custom kind listed by generations with different
// target namespaces is one object, kept across the upgrade (item 6).
func TestScopeComesFromTheMapper(t *testing.T) {
	interceptors := schema.GroupVersionResource{Group: "triggers.tekton.dev", Version: "v1alpha1", Resource: "clusterinterceptors"}
	ci := mkObj("triggers.tekton.dev/v1alpha1", "ClusterInterceptor", "", "cel", "")
	const nsAnnotation = "operator.tekton.dev/target-namespace"
	f := newFixture(t)
	f.c.Register(interceptors, "ClusterInterceptor", false)
	f.exec.Mapper = f.c.Mapper()
	f.exec.Family.TargetNamespace = func(set *unstructured.Unstructured) string { return set.GetAnnotations()[nsAnnotation] }
	f.seed(t, nil, []*unstructured.Unstructured{ci}, map[string]string{"cel": "static-v1"})
	for _, s := range []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{ci}},
		{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{ci}},
	} {
		u := f.setObject(s)
		u.SetAnnotations(map[string]string{nsAnnotation: "ns-" + s.gen})
		if err := f.c.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.steps(t, desired("v2", "static"), 5, nil); err != nil {
		t.Fatal(err)
	}
	got, ok := f.owners(handofftest.Key{Group: "triggers.tekton.dev", Kind: "ClusterInterceptor", Name: "cel"})
	if !ok {
		t.Fatal("the ClusterInterceptor both generations list was deleted")
	}
	if diff := cmp.Diff([]string{"static-v2"}, got); diff != "" {
		t.Errorf("ClusterInterceptor owners (-want +got):\n%s", diff)
	}
}

// Finalize checks the family before the set (item 7): an executor with an
// empty selector is an invalid family, whatever the set.
func TestFinalizeValidatesTheFamilyFirst(t *testing.T) {
	for name, mutate := range map[string]func(*handoff.Family){
		"empty selector":      func(f *handoff.Family) { f.Selector = nil },
		"no generation label": func(f *handoff.Family) { f.GenerationLabel = "" },
		"no set resource":     func(f *handoff.Family) { f.Resource = schema.GroupVersionResource{} },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			set := f.setObject(setSpec{name: "static-v1", gen: "v1", role: "static"})
			mutate(&f.exec.Family)
			_, err := f.exec.Finalize(context.Background(), set)
			if !errors.Is(err, handoff.ErrInvalidFamily) {
				t.Errorf("Finalize error = %v, want ErrInvalidFamily", err)
			}
		})
	}
}

// A set released by a rollback is not Ready until its controller applied it
// again (item 8): the Step that releases it retires nothing.
func TestReleasedSetIsNotReadyUntilReapplied(t *testing.T) {
	f := newFixture(t)
	shared := cm("shared")
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, supersededBy: "v2", lists: []*unstructured.Unstructured{shared}},
		{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{shared}},
	}, []*unstructured.Unstructured{shared}, map[string]string{"shared": "static-v2"})
	res, err := f.exec.Step(context.Background(), desired("v1", "static"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[handoff.ActionKind]int{}
	for _, a := range res.Plan.Actions {
		kinds[a.Kind]++
	}
	want := map[handoff.ActionKind]int{handoff.ActionRelease: 1, handoff.ActionSupersede: 1, handoff.ActionWait: 1}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("actions of the releasing Step (-want +got):\n%s\n%s", diff, res.Plan)
	}
	if w := res.Plan.Of(handoff.ActionWait); len(w) == 1 && w[0].Reason == "" {
		t.Errorf("the wait gives no reason")
	}
}

// A kept resource is handed to every live set that lists it, not to one:
// then a successor retired by a racing reconcile, whose view predates the
// handover, does not take the resource with it.
func TestHandoverToEveryLister(t *testing.T) {
	f := newFixture(t)
	shared := cm("shared")
	lists := []*unstructured.Unstructured{shared}
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 30, ready: true, supersededBy: "v2", lists: lists},
		{name: "static-v2-a", gen: "v2", role: "static", age: 20, ready: true, lists: lists},
		{name: "static-v2-b", gen: "v2", role: "static", age: 10, ready: true, lists: lists},
	}, lists, map[string]string{"shared": "static-v1"})
	set, _ := f.c.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "static-v1"})
	if _, err := f.exec.Finalize(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	got, _ := f.owners(cmKey("shared"))
	if diff := cmp.Diff([]string{"static-v2-b", "static-v2-a"}, got); diff != "" {
		t.Errorf("owners after Finalize (-want +got):\n%s", diff)
	}
	// The racing reconcile deletes the preferred successor without a
	// handover of its own: the other lister keeps the resource.
	for _, name := range []string{"static-v1", "static-v2-b"} {
		if err := f.c.Dynamic().Resource(handofftest.SetResource).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.c.CollectGarbage()
	got, ok := f.owners(cmKey("shared"))
	if !ok {
		t.Fatal("the shared ConfigMap was collected with the successor it was handed to")
	}
	if diff := cmp.Diff([]string{"static-v2-a"}, got); diff != "" {
		t.Errorf("owners after the garbage collector ran (-want +got):\n%s", diff)
	}
}

// A keep-annotated object that also names a set already being deleted is
// released from that set too: the garbage collector would take it once that
// set is gone.
func TestKeptObjectReleasedFromEveryGoingSet(t *testing.T) {
	f := newFixture(t, handofftest.WithoutAutoGC())
	kept := cm("kept")
	kept.SetAnnotations(map[string]string{handoff.DefaultKeepAnnotation: handoff.KeepValue})
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{kept}},
		{name: "static-v0", gen: "v0", role: "static", age: 30, ready: true},
	}, nil, nil)
	// static-v0 is being deleted (its finalizer holds it) and still owns
	// the object, beside static-v1.
	sets := f.c.ClientFor("seed").Resource(handofftest.SetResource)
	v0, _ := f.c.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "static-v0"})
	v0.SetFinalizers([]string{"example.dev/hold"})
	if _, err := sets.Update(context.Background(), v0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sets.Delete(context.Background(), "static-v0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o := kept.DeepCopy()
	o.SetOwnerReferences([]metav1.OwnerReference{
		f.fam.OwnerReference(handoff.Set{Name: "static-v1", UID: "uid-static-v1"}),
		{APIVersion: "operator.tekton.dev/v1alpha1", Kind: setKind, Name: "static-v0", UID: "uid-static-v0"},
	})
	if err := f.c.Add(o); err != nil {
		t.Fatal(err)
	}
	// Removal: the executor retires static-v1 (static-v0 stays, held).
	if _, err := f.exec.Step(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// Both sets go: the hold is lifted, the garbage collector runs.
	v0, _ = f.c.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "static-v0"})
	v0.SetFinalizers(nil)
	if _, err := sets.Update(context.Background(), v0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.c.CollectGarbage()
	got, ok := f.owners(cmKey("kept"))
	if !ok {
		t.Fatal("the keep-annotated ConfigMap was deleted")
	}
	if len(got) != 0 {
		t.Errorf("the kept ConfigMap still names %v", got)
	}
}

// A set without a finalizer has no controller to finalize it: its
// retirement deletes the obsolete objects it installed without an owner,
// which the garbage collector never would (found by the model-based test).
func TestRetireOfASetWithoutFinalizer(t *testing.T) {
	f := newFixture(t)
	hook := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "only-v1.webhook", "")
	shared := cm("shared")
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{shared, hook}},
		{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: []*unstructured.Unstructured{shared}},
	}, []*unstructured.Unstructured{shared, hook}, map[string]string{"shared": "static-v1"})
	if err := f.steps(t, desired("v2", "static"), 5, nil); err != nil {
		t.Fatal(err)
	}
	if f.c.Exists(handofftest.Key{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "only-v1.webhook"}) {
		t.Error("the obsolete webhook configuration of the retired set is still there")
	}
	if got, ok := f.owners(cmKey("shared")); !ok || len(got) != 1 || got[0] != "static-v2" {
		t.Errorf("shared ConfigMap: owners %v, present %v; want static-v2", got, ok)
	}
}

// The same retirement, when the delete of the webhook configuration fails:
// the set stays, held by the executor's own finalizer and no longer live,
// and the next Step finishes the job (ActionFinalize) before it goes. Were
// the set deleted first and the delete to fail, nothing would remember the
// webhook configuration.
func TestRetireOfASetWithoutFinalizerResumes(t *testing.T) {
	f := newFixture(t)
	hook := mkObj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "only-v1.webhook", "")
	hookKey := handofftest.Key{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "only-v1.webhook"}
	v1Key := handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: "static-v1"}
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{hook}},
		{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true},
	}, []*unstructured.Unstructured{hook}, nil)
	failed := 0
	f.c.InjectFaults(func(c handofftest.Call) handofftest.Fault {
		if c.Verb == "delete" && c.Name == "only-v1.webhook" && failed == 0 {
			failed++
			return handofftest.Fault{Err: fmt.Errorf("injected")}
		}
		return handofftest.Fault{}
	}, "executor")
	if _, err := f.exec.Step(context.Background(), desired("v2", "static")); err == nil {
		t.Fatal("the Step whose delete failed returned no error")
	}
	set, ok := f.c.Get(v1Key)
	if !ok || set.GetDeletionTimestamp() == nil {
		t.Fatalf("static-v1 after the failed Step: present %v; want it deleting, held by the executor's finalizer", ok)
	}
	if d := cmp.Diff([]string{handoff.ExecutorFinalizer}, set.GetFinalizers()); d != "" {
		t.Errorf("finalizers (-want +got):\n%s", d)
	}
	if !f.c.Exists(hookKey) {
		t.Fatal("the injected failure did not keep the webhook configuration: the test shows nothing")
	}
	res, err := f.exec.Step(context.Background(), desired("v2", "static"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Plan.Of(handoff.ActionFinalize); len(got) != 1 || got[0].Set != "static-v1" {
		t.Errorf("the next Step's plan:\n%s\nwant one Finalize of static-v1", res.Plan)
	}
	if f.c.Exists(hookKey) || f.c.Exists(v1Key) {
		t.Errorf("after the next Step: webhook present %v, static-v1 present %v; want both gone", f.c.Exists(hookKey), f.c.Exists(v1Key))
	}
}

// tektoncd/operator makes the target Namespace the owner of the operator's
// own webhook configurations. That ownerReference places the object; it
// does not make it someone else's: with PlacementOwners, removing the last
// set that lists the webhook deletes it, where otherwise an admission
// webhook with failurePolicy Fail would outlive the Service it calls.
func TestPlacementOwnerDoesNotKeepAnObject(t *testing.T) {
	hook := mkObj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", "proxy.operator.tekton.dev", "")
	hookKey := handofftest.Key{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration", Name: "proxy.operator.tekton.dev"}
	for name, tc := range map[string]struct {
		placement []schema.GroupKind
		wantGone  bool
	}{
		"a Namespace owner counts as an owner":      {wantGone: false},
		"a Namespace owner is a placement (tekton)": {placement: []schema.GroupKind{{Kind: "Namespace"}}, wantGone: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			ns := mkObj("v1", "Namespace", "", testNS, "")
			f.seed(t, []setSpec{{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, lists: []*unstructured.Unstructured{hook}}}, []*unstructured.Unstructured{ns}, nil)
			live, _ := f.c.Get(handofftest.Key{Kind: "Namespace", Name: testNS})
			owned := hook.DeepCopy()
			owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: testNS, UID: live.GetUID()}})
			if err := f.c.Add(owned); err != nil {
				t.Fatal(err)
			}
			f.exec.Prune.PlacementOwners = tc.placement
			res, err := f.finalizeAndDelete(t, "static-v1")
			if err != nil {
				t.Fatal(err)
			}
			if gone := !f.c.Exists(hookKey); gone != tc.wantGone {
				t.Errorf("webhook gone %v, want %v; skipped %v", gone, tc.wantGone, res.Skipped)
			}
		})
	}
}
