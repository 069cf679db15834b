package inventory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The misconfigurations of issue 37, on an inventory: each fails the
// first Step with a *ConfigError naming the field, before the executor
// reads or writes anything (a missing Mapper was found only by the second
// Step, after the first had recorded the inventory).
func TestMisconfiguredInventoryExecutorTouchesNothing(t *testing.T) {
	objs := []unstructured.Unstructured{obj("v1", "ConfigMap", servingNS, "config-network")}
	tests := map[string]struct {
		inv  inventory.Inventory
		exec func(inv inventory.Inventory, c *handofftest.Cluster, g *inventory.Generation) *handoff.Executor
		want []string
	}{
		"no Mapper": {
			exec: func(inv inventory.Inventory, c *handofftest.Cluster, g *inventory.Generation) *handoff.Executor {
				return inv.Executor(c.ClientFor("executor"), nil, crUID)
			},
			want: []string{"Executor.Mapper"},
		},
		"no Build, neither the executor's nor the Desired's (made by hand)": {
			exec: func(inv inventory.Inventory, c *handofftest.Cluster, g *inventory.Generation) *handoff.Executor {
				g.Desired.Build = nil
				return inv.Executor(c.ClientFor("executor"), c.Mapper(), crUID)
			},
			want: []string{"Executor.Build"},
		},
		"an inventory without a namespace": {
			inv: inventory.Inventory{Component: "knative-serving"},
			exec: func(inv inventory.Inventory, c *handofftest.Cluster, g *inventory.Generation) *handoff.Executor {
				return inv.Executor(c.ClientFor("executor"), c.Mapper(), crUID)
			},
			want: []string{"Executor.Family.Namespace"},
		},
		"Owners without AnyUnowned: the dropped objects the component owns would stay": {
			exec: func(inv inventory.Inventory, c *handofftest.Cluster, g *inventory.Generation) *handoff.Executor {
				prune := handoff.DefaultPruneOptions()
				prune.Owners = []types.UID{crUID}
				dyn := c.ClientFor("executor")
				return &handoff.Executor{Family: inv.Family(), Sets: inv.Sets(dyn), Dynamic: dyn, Mapper: c.Mapper(), Prune: prune}
			},
			want: []string{"Executor.Prune.Owners"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := handofftest.NewCluster()
			inv := tc.inv
			if inv.Component == "" {
				inv = inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving"}
			}
			// The generation is made from a valid inventory: Generation
			// refuses one without a namespace itself.
			g, err := inventory.Inventory{Namespace: "knative-operator", Component: inv.Component}.Generation("v1", objs)
			if err != nil {
				t.Fatal(err)
			}
			e := tc.exec(inv, c, g)
			_, err = e.Step(context.Background(), g.Desired)
			var ce *handoff.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Step error %v, want a *ConfigError naming %v", err, tc.want)
			}
			if d := cmp.Diff(tc.want, ce.Fields()); d != "" {
				t.Errorf("fields at fault (-want +got):\n%s", d)
			}
			if got := c.Writes(); len(got) != 0 {
				t.Errorf("a misconfigured executor wrote: %v", got)
			}
			if got := c.Calls(); len(got) != 0 {
				t.Errorf("a misconfigured executor made calls: %v", got)
			}
		})
	}
}

// An executor without Sets records the inventory in the inventory's
// namespace: the family carries it (it was a "namespace required" error
// from the API server).
func TestExecutorWithoutSetsRecordsInTheNamespace(t *testing.T) {
	c := handofftest.NewCluster()
	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving"}
	g, err := inv.Generation("v1", []unstructured.Unstructured{obj("v1", "ConfigMap", servingNS, "config-network")})
	if err != nil {
		t.Fatal(err)
	}
	dyn := c.ClientFor("executor")
	e := &handoff.Executor{Family: inv.Family(), Dynamic: dyn, Mapper: c.Mapper(), Build: g.Build, Prune: inv.PruneOptions(crUID)}
	if _, err := e.Step(context.Background(), g.Desired); err != nil {
		t.Fatal(err)
	}
	// sha256("v1") starts 3bfc269594.
	key := handofftest.Key{Kind: "ConfigMap", Namespace: "knative-operator", Name: "knative-serving-inventory-part-0-3bfc269594"}
	if !c.Exists(key) {
		t.Errorf("%s not recorded; objects: %v", key, c.Keys())
	}
}

func TestPruneOptions(t *testing.T) {
	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving"}
	want := handoff.DefaultPruneOptions()
	want.AnyUnowned = true
	if d := cmp.Diff(want, inv.PruneOptions()); d != "" {
		t.Errorf("without owners (-want +got):\n%s", d)
	}
	want.Owners = []types.UID{crUID}
	if d := cmp.Diff(want, inv.PruneOptions(crUID)); d != "" {
		t.Errorf("with the component's UID (-want +got):\n%s", d)
	}
	e := inv.Executor(nil, nil, crUID)
	if d := cmp.Diff(want, e.Prune); d != "" {
		t.Errorf("the executor's (-want +got):\n%s", d)
	}
	if fam := e.Family; !fam.Namespaced || fam.Namespace != inv.Namespace {
		t.Errorf("the executor's family: Namespaced %v, Namespace %q; want true, %q", fam.Namespaced, fam.Namespace, inv.Namespace)
	}
}

// With Owner, the inventories belong to the component object: each
// ConfigMap names it (one recorded before gains it on its next update),
// and the garbage collector takes them when the object goes.
func TestOwnerTakesTheInventoriesWithIt(t *testing.T) {
	ctx := context.Background()
	const ns = "knative-operator"
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	c := handofftest.NewCluster()
	c.Register(widgets, "Widget", true)
	cr, err := c.ClientFor("test").Resource(widgets).Namespace(ns).Create(ctx,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	step := func(inv inventory.Inventory, objs ...unstructured.Unstructured) handoff.Result {
		t.Helper()
		g, err := inv.Generation("v1", objs)
		if err != nil {
			t.Fatal(err)
		}
		res, err := inv.Executor(c.ClientFor("executor"), c.Mapper(), cr.GetUID()).Step(ctx, g.Desired)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	owners := func(name string) []types.UID {
		t.Helper()
		cm, ok := c.Get(handofftest.Key{Kind: "ConfigMap", Namespace: ns, Name: name})
		if !ok {
			t.Fatalf("inventory %s is gone", name)
		}
		var out []types.UID
		for _, o := range cm.GetOwnerReferences() {
			if o.Kind != "Widget" || o.Name != "w" || o.APIVersion != "example.com/v1" {
				t.Errorf("inventory %s: ownerReference %+v, want the Widget w", name, o)
			}
			if o.Controller != nil && *o.Controller || o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
				t.Errorf("inventory %s: ownerReference %+v is a controller or blocking one", name, o)
			}
			out = append(out, o.UID)
		}
		return out
	}

	// Recorded before the operator set Owner: no owner.
	inv := inventory.Inventory{Namespace: ns, Component: "widget-w"}
	res := step(inv, obj("v1", "ConfigMap", ns, "a"))
	name := res.Family[0].Name
	if got := owners(name); len(got) != 0 {
		t.Fatalf("inventory recorded without Owner has owners %v", got)
	}
	// Updated in place with Owner: it gains the Widget.
	inv.Owner = inventory.OwnerOf(cr)
	step(inv, obj("v1", "ConfigMap", ns, "a"), obj("v1", "ConfigMap", ns, "b"))
	if d := cmp.Diff([]types.UID{cr.GetUID()}, owners(name)); d != "" {
		t.Errorf("owners after the update in place (-want +got):\n%s", d)
	}

	// The Widget goes: so do its inventories.
	if err := c.ClientFor("test").Resource(widgets).Namespace(ns).Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.CollectGarbage()
	for _, k := range c.Keys() {
		if k.Kind == "ConfigMap" && k.Namespace == ns && strings.HasPrefix(k.Name, inv.NamePrefix()) {
			if o, ok := c.Get(k); ok && o.GetDeletionTimestamp() == nil {
				t.Errorf("inventory %s stayed after its owner was deleted", k.Name)
			}
		}
	}
}

func TestOwnerValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		owner inventory.Owner
		says  string
	}{
		"an owner in the inventory's namespace": {owner: inventory.Owner{APIVersion: "v1", Kind: "W", Name: "w", UID: "u", Namespace: "ops"}},
		"a cluster-scoped owner":                {owner: inventory.Owner{APIVersion: "v1", Kind: "W", Name: "w", UID: "u"}},
		"an owner in another namespace":         {owner: inventory.Owner{APIVersion: "v1", Kind: "W", Name: "w", UID: "u", Namespace: "other"}, says: "another namespace"},
		"an owner without a UID":                {owner: inventory.Owner{APIVersion: "v1", Kind: "W", Name: "w"}, says: "needs apiVersion, kind, name and UID"},
	} {
		t.Run(name, func(t *testing.T) {
			inv := inventory.Inventory{Namespace: "ops", Component: "c", Owner: &tc.owner}
			err := inv.Validate()
			switch {
			case tc.says == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.says != "" && (!errors.Is(err, handoff.ErrInvalidFamily) || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("Validate() = %v, want ErrInvalidFamily saying %q", err, tc.says)
			}
		})
	}
}
