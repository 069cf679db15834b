package handoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// The model's oracle is tested here on hand-made objects and writes, so
// that what TestModel reports rests on rules stated once and checked.

type setOpt func(*unstructured.Unstructured)

func withStatus(ready bool, observed int64) setOpt {
	return func(u *unstructured.Unstructured) {
		st := "False"
		if ready {
			st = "True"
		}
		u.Object["status"] = map[string]any{"observedGeneration": observed,
			"conditions": []any{map[string]any{"type": "Ready", "status": st}}}
	}
}

func withAnnotation(k, v string) setOpt {
	return func(u *unstructured.Unstructured) {
		ann := u.GetAnnotations()
		ann[k] = v
		u.SetAnnotations(ann)
	}
}

func deleting() setOpt {
	return func(u *unstructured.Unstructured) {
		ts := metav1.NewTime(time.Unix(0, 0))
		u.SetDeletionTimestamp(&ts)
	}
}

// testSet builds a set of the family; role "" leaves the role to the name.
func testSet(name, uid, gen, role string, manifests []any, opts ...setOpt) *unstructured.Unstructured {
	u := handofftest.Object(mSetGVR.GroupVersion().String(), mSetKind, "", name,
		map[string]string{mCreatedBy: "TektonPipeline", mType: "main", mGeneration: gen},
		map[string]any{"spec": map[string]any{"manifests": manifests}})
	if role != "" {
		lbls := u.GetLabels()
		lbls[handoff.DefaultRoleLabel] = role
		u.SetLabels(lbls)
	}
	u.SetUID(types.UID(uid))
	u.SetGeneration(1)
	u.SetAnnotations(map[string]string{mTargetNS: nsA})
	for _, o := range opts {
		o(u)
	}
	return u
}

// triggersSet builds a set of the second family.
func triggersSet(name string, manifests []any, opts ...setOpt) *unstructured.Unstructured {
	u := handofftest.Object(mSetGVR.GroupVersion().String(), mSetKind, "", name,
		map[string]string{mCreatedBy: tComponent, mType: "main", mGeneration: "v1", handoff.DefaultRoleLabel: "static"},
		map[string]any{"spec": map[string]any{"manifests": manifests}})
	u.SetUID(types.UID(name))
	u.SetAnnotations(map[string]string{mTargetNS: nsA})
	for _, o := range opts {
		o(u)
	}
	return u
}

func testCM(name string, owner string, ann map[string]string) *unstructured.Unstructured {
	u := handofftest.Object("v1", "ConfigMap", nsA, name, nil, nil)
	u.SetUID(types.UID("cm-" + name))
	if owner != "" {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: mSetGVR.GroupVersion().String(), Kind: mSetKind, Name: owner, UID: types.UID(owner)}})
	}
	if ann != nil {
		u.SetAnnotations(ann)
	}
	return u
}

func TestModelReadsSets(t *testing.T) {
	cm := manifest(kConfigMap, "", "config", nil, nil) // namespace from the set
	ci := manifest(kInterceptor, "", "core", nil, nil) // cluster-scoped custom kind
	type got struct {
		Role                      string
		Readable, Ready, Deleting bool
		Superseded                bool
		Refs                      []handofftest.Key
	}
	refs := []handofftest.Key{{Kind: "ConfigMap", Namespace: nsA, Name: "config"}, {Group: "triggers.tekton.dev", Kind: "ClusterInterceptor", Name: "core"}}
	tests := map[string]struct {
		set  *unstructured.Unstructured
		want got
	}{
		"role label, Ready for its generation": {
			set:  testSet("a", "a", "v1", "static", []any{cm, ci}, withStatus(true, 1)),
			want: got{Role: "static", Readable: true, Ready: true, Refs: refs},
		},
		"legacy name gives the role": {
			set:  testSet(mPrefix+"deployment-x2k4q", "b", "v1", "", []any{cm}),
			want: got{Role: "deployment", Readable: true, Refs: refs[:1]},
		},
		"no role in label or name": {
			set:  testSet(mPrefix+"x2k4q", "c", "v1", "", []any{cm}),
			want: got{Refs: refs[:1]},
		},
		"a manifest without a name": {
			set:  testSet("d", "d", "v1", "static", []any{cm, map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}),
			want: got{Role: "static", Refs: refs[:1]},
		},
		"Ready for an older generation is not Ready": {
			set:  testSet("e", "e", "v1", "static", nil, withStatus(true, 0)),
			want: got{Role: "static", Readable: true},
		},
		"superseded and deleting": {
			set:  testSet("f", "f", "v1", "static", nil, withStatus(true, 1), withAnnotation(handoff.DefaultSupersededAnnotation, "v2"), deleting()),
			want: got{Role: "static", Readable: true, Ready: true, Superseded: true, Deleting: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := deriveSet(tc.set)
			g := got{Role: s.role, Readable: s.readable(), Ready: s.ready, Deleting: s.deleting, Superseded: s.superseded, Refs: s.refs}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("deriveSet (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelChecker(t *testing.T) {
	cm := manifest(kConfigMap, nsA, "shared", nil, nil)
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	put := func(s int, actor, verb string, effect handofftest.Effect, obj *unstructured.Unstructured) handofftest.Write {
		return handofftest.Write{Time: at(s), Actor: actor, Verb: verb, Key: handofftest.KeyOf(obj), UID: obj.GetUID(), Effect: effect, Object: obj}
	}
	v2 := &modelDesired{Gen: 1}
	readyV2 := func(role string) *unstructured.Unstructured {
		return testSet(role+"-v2", role+"-v2", "v2", role, []any{cm}, withStatus(true, 1), withAnnotation(mHash, roleHash(1, role, 0)))
	}
	old := testSet("static-v1", "static-v1", "v1", "static", []any{cm})
	tests := map[string]struct {
		desired *modelDesired
		writes  []handofftest.Write
		want    []string
	}{
		"the garbage collector deletes what a live set lists": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, old),
				put(2, "controller", "create", handofftest.Created, testCM("shared", "gone", nil)),
				put(3, handofftest.GCActor, "delete", handofftest.Removed, testCM("shared", "gone", nil)),
			},
			want: []string{"I1"},
		},
		"it was garbage before the set listed it": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, testCM("shared", "owner", nil)),
				put(2, "executor-1", "delete", handofftest.Removed, testSet("owner", "owner", "v1", "static", nil)),
				put(3, "legacy", "create", handofftest.Created, old),
				put(4, handofftest.GCActor, "delete", handofftest.Removed, testCM("shared", "owner", nil)),
			},
		},
		"only a deleting set lists it": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, testSet("static-v1", "static-v1", "v1", "static", []any{cm}, deleting())),
				put(2, "controller", "create", handofftest.Created, testCM("shared", "static-v1", nil)),
				put(3, "controller", "delete", handofftest.Removed, testCM("shared", "static-v1", nil)),
			},
		},
		"the pipelines finalizer deletes what a live set of the other family lists": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, triggersSet("t1", []any{cm})),
				put(2, "seed", "create", handofftest.Created, testSet("static-v1", "static-v1", "v1", "static", []any{cm}, deleting())),
				put(3, "controller", "delete", handofftest.Removed, testCM("shared", "", nil)),
			},
			want: []string{"I4-families"},
		},
		"the other family's finalizer deletes what a live pipelines set lists": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, old),
				put(2, "seed", "create", handofftest.Created, triggersSet("t1", []any{cm}, deleting())),
				put(3, actorSecondCtrl, "delete", handofftest.Removed, testCM("shared", "", nil)),
			},
			want: []string{"I4-families", "I1"},
		},
		"the garbage collector takes what a pipelines set owned while the other family lists it": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, triggersSet("t1", []any{cm})),
				put(2, "seed", "create", handofftest.Created, testSet("static-v1", "static-v1", "v1", "static", []any{cm})),
				put(3, "controller", "create", handofftest.Created, testCM("shared", "static-v1", nil)),
				put(4, "executor-1", "delete", handofftest.Removed, testSet("static-v1", "static-v1", "v1", "static", []any{cm})),
				put(5, handofftest.GCActor, "delete", handofftest.Removed, testCM("shared", "static-v1", nil)),
			},
			want: []string{"I4-families"},
		},
		"the other family deletes what only it lists": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, triggersSet("t1", []any{cm})),
				put(2, "seed", "create", handofftest.Created, testCM("shared", "", nil)),
				put(3, actorSecondCtrl, "delete", handofftest.Removed, testCM("shared", "", nil)),
			},
		},
		"an admin uninstalls a CRD with the objects a live set lists": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, old),
				put(2, "seed", "create", handofftest.Created, testCM("shared", "", map[string]string{mKeep: handoff.KeepValue})),
				put(3, actorAdmin, "delete", handofftest.Removed, testCM("shared", "", map[string]string{mKeep: handoff.KeepValue})),
			},
		},
		"a keep-annotated object is deleted": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, testCM("kept", "", map[string]string{mKeep: handoff.KeepValue})),
				put(2, handofftest.GCActor, "delete", handofftest.Removed, testCM("kept", "", map[string]string{mKeep: handoff.KeepValue})),
			},
			want: []string{"keep"},
		},
		"an old set retired while a desired set is not Ready": {
			desired: v2,
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, old),
				put(2, "seed", "create", handofftest.Created, readyV2("static")),
				put(3, "seed", "create", handofftest.Created, testSet("deployment-v2", "deployment-v2", "v2", "deployment", nil)),
				put(4, "executor-1", "delete", handofftest.Deleting, testSet("static-v1", "static-v1", "v1", "static", []any{cm}, deleting())),
			},
			want: []string{"I5"},
		},
		"an old set retired once every desired set is Ready": {
			desired: v2,
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, old),
				put(2, "seed", "create", handofftest.Created, readyV2("static")),
				put(3, "seed", "create", handofftest.Created, readyV2("deployment")),
				put(4, "executor-1", "delete", handofftest.Deleting, testSet("static-v1", "static-v1", "v1", "static", []any{cm}, deleting())),
			},
		},
		"a second set of a generation and role": {
			writes: []handofftest.Write{
				put(1, "legacy", "create", handofftest.Created, testSet(mPrefix+"static-x2k4q", "l", "v1", "", nil)),
				put(2, "executor-1", "create", handofftest.Created, testSet("static-v1", "static-v1", "v1", "static", nil)),
			},
			want: []string{"I2"},
		},
		"a write to an object no set lists": {
			writes: []handofftest.Write{
				put(1, "controller", "update", handofftest.Updated, testCM("user-config", "", nil)),
			},
			want: []string{"I4"},
		},
		"the executor changes more than owners": {
			writes: []handofftest.Write{
				put(1, "seed", "create", handofftest.Created, old),
				put(2, "controller", "create", handofftest.Created, testCM("shared", "static-v1", nil)),
				put(3, "executor-1", "patch", handofftest.Updated, testCM("shared", "", map[string]string{"x": "y"})),
			},
			want: []string{"I4"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ch := newChecker([]span{{from: at(0), to: at(100), desired: tc.desired}}, nil)
			for _, w := range tc.writes {
				ch.write(w)
			}
			var got []string
			for _, v := range ch.vs {
				got = append(got, v.Inv)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%v", diff, ch.vs)
			}
		})
	}
}

func TestModelShrinks(t *testing.T) {
	ops := make([]op, 30)
	for i := range ops {
		ops[i] = op{Kind: opCtrl, Lag: i}
	}
	// Fails when ops with Lag 7 and 21 are both there, in that order.
	fails := func(ops []op) bool {
		seen7 := false
		for _, o := range ops {
			seen7 = seen7 || o.Lag == 7
			if o.Lag == 21 && seen7 {
				return true
			}
		}
		return false
	}
	got := shrinkOps(ops, fails, 1000)
	want := []op{{Kind: opCtrl, Lag: 7}, {Kind: opCtrl, Lag: 21}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(op{})); diff != "" {
		t.Errorf("shrinkOps (-want +got):\n%s", diff)
	}
}

// A removal Step that reports the component settled is the operator's
// last: the world checks that the API server holds no set of the family
// then, and stops stepping the component until a generation is desired.
func TestModelRemovalSettled(t *testing.T) {
	for name, tc := range map[string]struct {
		sets    []*unstructured.Unstructured
		res     handoff.Result
		err     error
		dropped bool
		want    []string
	}{
		"settled with no set left":               {dropped: true},
		"settled while a set is left":            {sets: []*unstructured.Unstructured{testSet("static-v1", "static-v1", "v1", "static", nil)}, dropped: true, want: []string{"I3-removal"}},
		"a set of another family does not count": {sets: []*unstructured.Unstructured{triggersSet("t1", nil)}, dropped: true},
		"requeued":                               {sets: []*unstructured.Unstructured{testSet("static-v1", "static-v1", "v1", "static", nil)}, res: handoff.Result{Requeue: true}},
		"failed":                                 {sets: []*unstructured.Unstructured{testSet("static-v1", "static-v1", "v1", "static", nil)}, err: context.Canceled},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := newModelWorld(modelConfig{Background: true, ReadyAfter: 1, Executors: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.c.Add(tc.sets...); err != nil {
				t.Fatal(err)
			}
			w.stepped("executor-1", nil, tc.res, tc.err)
			var got []string
			for _, v := range w.vs {
				got = append(got, v.Inv)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || w.dropped != tc.dropped {
				t.Errorf("violations (-want +got):\n%s\ndropped %v, want %v", diff, w.dropped, tc.dropped)
			}
		})
	}
}
