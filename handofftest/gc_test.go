package handofftest

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// state describes an object for comparing in tables: "gone", "live", or
// "deleting" followed by its finalizers, and the names of its owners.
func state(c *Cluster, key Key) string {
	u, ok := c.Get(key)
	if !ok {
		return "gone"
	}
	s := "live"
	if u.GetDeletionTimestamp() != nil {
		s = "deleting"
		for _, f := range u.GetFinalizers() {
			s += " " + f
		}
	}
	var owners []string
	for _, r := range u.GetOwnerReferences() {
		owners = append(owners, r.Name)
	}
	if len(owners) > 0 {
		s += " owners=" + strings.Join(owners, ",")
	}
	return s
}

func cmKey(name string) Key  { return keyOf(cmGVR, "ConfigMap", "ns", name) }
func setKey(name string) Key { return keyOf(setGVR, "TektonInstallerSet", "", name) }

// fixture builds two sets "old" and "new" and config maps owned by them:
// "only-old" (old), "shared" (old and new), "only-new" (new),
// "nonblocking" (old, blockOwnerDeletion false) and "held" (old, with a
// finalizer), and "grandchild" owned by "only-old".
func fixture(t *testing.T, c *Cluster, oldFinalizers ...string) {
	t.Helper()
	sets := c.Dynamic().Resource(setGVR)
	cms := c.Dynamic().Resource(cmGVR).Namespace("ns")
	old := create(t, sets, installerSet("old", oldFinalizers...))
	nu := create(t, sets, installerSet("new"))
	onlyOld := create(t, cms, ownedBy(configMap("ns", "only-old"), old))
	create(t, cms, ownedBy(configMap("ns", "shared"), old, nu))
	create(t, cms, ownedBy(configMap("ns", "only-new"), nu))
	nb := ownedBy(configMap("ns", "nonblocking"), old)
	refs := nb.GetOwnerReferences()
	refs[0].BlockOwnerDeletion = nil
	nb.SetOwnerReferences(refs)
	create(t, cms, nb)
	held := ownedBy(configMap("ns", "held"), old)
	held.SetFinalizers([]string{"hold"})
	create(t, cms, held)
	create(t, cms, ownedBy(configMap("ns", "grandchild"), onlyOld))
}

var fixtureKeys = []Key{
	setKey("old"), setKey("new"),
	cmKey("only-old"), cmKey("shared"), cmKey("only-new"), cmKey("nonblocking"), cmKey("held"), cmKey("grandchild"),
}

func states(c *Cluster) map[string]string {
	out := map[string]string{}
	for _, k := range fixtureKeys {
		out[k.Name] = state(c, k)
	}
	return out
}

func TestPropagation(t *testing.T) {
	tests := map[string]struct {
		policy        *metav1.DeletionPropagation
		oldFinalizers []string
		want          map[string]string
		// afterRelease is the state once "held" loses its finalizer.
		afterRelease map[string]string
	}{
		"background by default": {
			want: map[string]string{
				"old": "gone", "new": "live", "only-old": "gone", "shared": "live owners=new", "only-new": "live owners=new",
				"nonblocking": "gone", "held": "deleting hold owners=old", "grandchild": "gone",
			},
			afterRelease: map[string]string{"held": "gone"},
		},
		"orphan leaves dependents without the reference": {
			policy: ptr(metav1.DeletePropagationOrphan),
			want: map[string]string{
				"old": "gone", "new": "live", "only-old": "live", "shared": "live owners=new", "only-new": "live owners=new",
				"nonblocking": "live", "held": "live", "grandchild": "live owners=only-old",
			},
			afterRelease: map[string]string{"held": "live"},
		},
		"foreground waits for blocking dependents": {
			policy: ptr(metav1.DeletePropagationForeground),
			want: map[string]string{
				"old": "deleting foregroundDeletion", "new": "live", "only-old": "gone", "shared": "live owners=new", "only-new": "live owners=new",
				"nonblocking": "gone", "held": "deleting hold owners=old", "grandchild": "gone",
			},
			afterRelease: map[string]string{"old": "gone", "held": "gone"},
		},
		"foreground keeps other finalizers": {
			policy:        ptr(metav1.DeletePropagationForeground),
			oldFinalizers: []string{"tektoninstallersets.operator.tekton.dev"},
			want: map[string]string{
				"old": "deleting tektoninstallersets.operator.tekton.dev foregroundDeletion", "new": "live", "only-old": "gone",
				"shared": "live owners=new", "only-new": "live owners=new",
				"nonblocking": "gone", "held": "deleting hold owners=old", "grandchild": "gone",
			},
			afterRelease: map[string]string{"old": "deleting tektoninstallersets.operator.tekton.dev", "held": "gone"},
		},
		"background on an owner with a finalizer keeps its dependents": {
			oldFinalizers: []string{"tektoninstallersets.operator.tekton.dev"},
			want: map[string]string{
				"old": "deleting tektoninstallersets.operator.tekton.dev", "new": "live", "only-old": "live owners=old",
				"shared": "live owners=old,new", "only-new": "live owners=new",
				"nonblocking": "live owners=old", "held": "live owners=old", "grandchild": "live owners=only-old",
			},
			afterRelease: map[string]string{"held": "live owners=old"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			fixture(t, c, tt.oldFinalizers...)
			sets := c.Dynamic().Resource(setGVR)
			if err := sets.Delete(context.Background(), "old", metav1.DeleteOptions{PropagationPolicy: tt.policy}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, states(c)); diff != "" {
				t.Errorf("after delete (-want +got):\n%s", diff)
			}
			_, err := c.Dynamic().Resource(cmGVR).Namespace("ns").Patch(context.Background(), "held", types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := states(c)
			for name, w := range tt.afterRelease {
				if got[name] != w {
					t.Errorf("after releasing held: %s = %q, want %q", name, got[name], w)
				}
			}
		})
	}
}

func TestGarbageCollection(t *testing.T) {
	tests := map[string]struct {
		deps func(owners ...*unstructured.Unstructured) []*unstructured.Unstructured
		want map[string]string
	}{
		"a dependent of the removed owner only is collected": {
			deps: func(o ...*unstructured.Unstructured) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{ownedBy(configMap("ns", "d"), o[0])}
			},
			want: map[string]string{"d": "gone"},
		},
		"a dependent with another live owner loses the dangling reference": {
			deps: func(o ...*unstructured.Unstructured) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{ownedBy(configMap("ns", "d"), o[0], o[1])}
			},
			want: map[string]string{"d": "live owners=b"},
		},
		"a dependent whose two owners are both removed is collected": {
			deps: func(o ...*unstructured.Unstructured) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{ownedBy(configMap("ns", "d"), o[0], o[2])}
			},
			want: map[string]string{"d": "gone"},
		},
		"a reference with a stale uid counts as missing": {
			deps: func(o ...*unstructured.Unstructured) []*unstructured.Unstructured {
				stale := o[1].DeepCopy()
				stale.SetUID("stale")
				return []*unstructured.Unstructured{ownedBy(configMap("ns", "d"), stale, o[1])}
			},
			want: map[string]string{"d": "live owners=b"},
		},
		"a reference to an unknown kind counts as live": {
			deps: func(o ...*unstructured.Unstructured) []*unstructured.Unstructured {
				d := ownedBy(configMap("ns", "d"), o[0])
				refs := d.GetOwnerReferences()
				refs = append(refs, metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "w"})
				d.SetOwnerReferences(refs)
				return []*unstructured.Unstructured{d}
			},
			want: map[string]string{"d": "live owners=w"},
		},
		"a chain is collected to its end": {
			deps: func(o ...*unstructured.Unstructured) []*unstructured.Unstructured {
				d := ownedBy(configMap("ns", "d"), o[0])
				d.SetUID("d-uid")
				return []*unstructured.Unstructured{d, ownedBy(configMap("ns", "e"), d)}
			},
			want: map[string]string{"d": "gone", "e": "gone"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, WithoutAutoGC())
			var owners []*unstructured.Unstructured
			for _, n := range []string{"a", "b", "c"} {
				o := installerSet(n)
				o.SetUID(types.UID("uid-" + o.GetName()))
				owners = append(owners, o)
			}
			deps := tt.deps(owners...)
			if err := c.Add(append(owners, deps...)...); err != nil {
				t.Fatal(err)
			}
			sets := c.Dynamic().Resource(setGVR)
			for _, n := range []string{"a", "c"} {
				if err := sets.Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range deps {
				if !c.Exists(KeyOf(d)) {
					t.Fatalf("%s collected without auto-GC", KeyOf(d))
				}
			}
			c.CollectGarbage()
			got := map[string]string{}
			for _, d := range deps {
				got[d.GetName()] = state(c, KeyOf(d))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("after CollectGarbage (-want +got):\n%s", diff)
			}
			for _, w := range c.Writes() {
				if w.Effect == Removed && w.Key.Kind == "ConfigMap" && w.Actor != GCActor {
					t.Errorf("%s removed by %q, want %q", w.Key, w.Actor, GCActor)
				}
			}
		})
	}
}

func TestAutoGCOnCreate(t *testing.T) {
	c := newCluster(t)
	ghost := installerSet("ghost")
	ghost.SetUID("never-existed")
	create(t, c.Dynamic().Resource(cmGVR).Namespace("ns"), ownedBy(configMap("ns", "d"), ghost))
	if c.Exists(cmKey("d")) {
		t.Error("an object created with only a missing owner was not collected")
	}
}

func TestOrphanFinalizer(t *testing.T) {
	c := newCluster(t)
	sets := c.Dynamic().Resource(setGVR)
	owner := create(t, sets, installerSet("o", FinalizerOrphan))
	create(t, c.Dynamic().Resource(cmGVR).Namespace("ns"), ownedBy(configMap("ns", "d"), owner))
	if err := sets.Delete(context.Background(), "o", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := state(c, setKey("o")); got != "gone" {
		t.Errorf("owner = %q, want gone", got)
	}
	if got := state(c, cmKey("d")); got != "live" {
		t.Errorf("dependent = %q, want live without owners", got)
	}
}
