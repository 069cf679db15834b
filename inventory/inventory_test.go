package inventory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
				e := inv.Executor(c.ClientFor("executor"), nil, crUID)
				e.Build = g.Build
				return e
			},
			want: []string{"Executor.Mapper"},
		},
		"no Build": {
			exec: func(inv inventory.Inventory, c *handofftest.Cluster, _ *inventory.Generation) *handoff.Executor {
				return inv.Executor(c.ClientFor("executor"), c.Mapper(), crUID)
			},
			want: []string{"Executor.Build"},
		},
		"an inventory without a namespace": {
			inv: inventory.Inventory{Component: "knative-serving"},
			exec: func(inv inventory.Inventory, c *handofftest.Cluster, g *inventory.Generation) *handoff.Executor {
				e := inv.Executor(c.ClientFor("executor"), c.Mapper(), crUID)
				e.Build = g.Build
				return e
			},
			want: []string{"Executor.Family.Namespace"},
		},
		"Owners without AnyUnowned: the dropped objects the component owns would stay": {
			exec: func(inv inventory.Inventory, c *handofftest.Cluster, g *inventory.Generation) *handoff.Executor {
				prune := handoff.DefaultPruneOptions()
				prune.Owners = []types.UID{crUID}
				dyn := c.ClientFor("executor")
				return &handoff.Executor{Family: inv.Family(), Sets: inv.Sets(dyn), Dynamic: dyn, Mapper: c.Mapper(), Build: g.Build, Prune: prune}
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
