package handoff_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// countingMapper answers from known, and from full once reset; it counts
// its resets.
type countingMapper struct {
	meta.RESTMapper
	full   meta.RESTMapper
	resets int
}

func (m *countingMapper) Reset() { m.resets++; m.RESTMapper = m.full }

func TestDynamicObjectsResolveKinds(t *testing.T) {
	ctx := context.Background()
	cmRef := handoff.Ref{Kind: "ConfigMap", Namespace: testNS, Name: "a"}
	widgetRef := handoff.Ref{Group: "example.dev", Kind: "Widget", Namespace: testNS, Name: "w"}
	gadgetRef := handoff.Ref{Group: "example.dev", Kind: "Gadget", Namespace: testNS, Name: "g"}
	core := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	core.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	withWidgets := meta.NewDefaultRESTMapper([]schema.GroupVersion{widgets.GroupVersion()})
	withWidgets.Add(widgets.GroupVersion().WithKind("Widget"), meta.RESTScopeNamespace)

	tests := map[string]struct {
		resettable bool
		gets       []handoff.Ref
		wantErrs   []error // one per get; nil: found
		wantResets int
	}{
		"a known kind needs no reset": {
			resettable: true, gets: []handoff.Ref{cmRef}, wantErrs: []error{nil},
		},
		"a kind served after the cache was filled is found after one reset": {
			resettable: true, gets: []handoff.Ref{widgetRef, widgetRef}, wantErrs: []error{nil, nil}, wantResets: 1,
		},
		"a kind unknown after a reset is not served; each call may reset once, so a long-lived value goes on learning": {
			resettable: true, gets: []handoff.Ref{gadgetRef, widgetRef, gadgetRef}, wantErrs: []error{handoff.ErrNotServed, nil, handoff.ErrNotServed}, wantResets: 2,
		},
		"a mapper that cannot be reset cannot tell a stale cache from a kind not served": {
			gets: []handoff.Ref{widgetRef, cmRef}, wantErrs: []error{handoff.ErrStaleMapper, nil},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := handofftest.NewCluster()
			c.Register(widgets, "Widget", true)
			if err := c.Add(cm("a"), mkObj("example.dev/v1", "Widget", testNS, "w", "")); err != nil {
				t.Fatal(err)
			}
			cm := &countingMapper{RESTMapper: core, full: meta.MultiRESTMapper{core, withWidgets}}
			var mapper meta.RESTMapper = cm
			if !tc.resettable {
				mapper = core
			}
			objs := handoff.NewDynamicObjects(c.Dynamic(), mapper)
			for i, ref := range tc.gets {
				live, err := objs.Get(ctx, ref)
				if want := tc.wantErrs[i]; want == nil {
					if err != nil || live.GetName() != ref.Name {
						t.Errorf("Get %s = %v, %v; want the object", ref, live, err)
					}
				} else if !errors.Is(err, want) {
					t.Errorf("Get %s error = %v, want %v", ref, err, want)
				}
			}
			if cm.resets != tc.wantResets {
				t.Errorf("%d resets, want %d", cm.resets, tc.wantResets)
			}
		})
	}
}

func TestDynamicObjectsWriteOnCondition(t *testing.T) {
	ctx := context.Background()
	ref := handoff.Ref{Kind: "ConfigMap", Namespace: testNS, Name: "a"}
	owner := metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: setKind, Name: "s", UID: "uid-s"}
	setup := func(t *testing.T) (*handofftest.Cluster, handoff.Objects) {
		t.Helper()
		c := handofftest.NewCluster()
		o := cm("a")
		o.SetOwnerReferences([]metav1.OwnerReference{owner})
		if err := c.Add(o); err != nil {
			t.Fatal(err)
		}
		return c, handoff.NewDynamicObjects(c.Dynamic(), c.Mapper())
	}
	key := handofftest.Key{Kind: "ConfigMap", Namespace: testNS, Name: "a"}

	t.Run("SetOwnerReferences replaces the owners, and clears them", func(t *testing.T) {
		c, objs := setup(t)
		next := metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: setKind, Name: "t", UID: "uid-t"}
		for _, want := range [][]metav1.OwnerReference{{next}, nil} {
			live, err := objs.Get(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := objs.SetOwnerReferences(ctx, live, want); err != nil {
				t.Fatal(err)
			}
			got, _ := c.Get(key)
			if diff := cmp.Diff(want, got.GetOwnerReferences()); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("SetOwnerReferences of an object changed since it was read is a conflict", func(t *testing.T) {
		c, objs := setup(t)
		live, err := objs.Get(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		changed := live.DeepCopy()
		changed.SetLabels(map[string]string{"touched": "yes"})
		if _, err := c.Dynamic().Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(testNS).Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := objs.SetOwnerReferences(ctx, live, nil); !apierrors.IsConflict(err) {
			t.Fatalf("SetOwnerReferences error = %v, want a Conflict", err)
		}
		got, _ := c.Get(key)
		if diff := cmp.Diff([]metav1.OwnerReference{owner}, got.GetOwnerReferences()); diff != "" {
			t.Errorf("owners changed (-want +got):\n%s", diff)
		}
	})
	t.Run("Delete of another UID is a conflict and deletes nothing", func(t *testing.T) {
		c, objs := setup(t)
		err := objs.Delete(ctx, ref, types.UID("not-this-one"), metav1.DeletePropagationBackground)
		if !apierrors.IsConflict(err) {
			t.Fatalf("Delete error = %v, want a Conflict", err)
		}
		if !c.Exists(key) {
			t.Fatal("the object was deleted")
		}
		live, _ := c.Get(key)
		if err := objs.Delete(ctx, ref, live.GetUID(), metav1.DeletePropagationBackground); err != nil {
			t.Fatal(err)
		}
		if c.Exists(key) {
			t.Error("Delete with the right UID left the object")
		}
	})
}
