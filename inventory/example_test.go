package inventory_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// inventories returns the inventory ConfigMaps in the cluster.
func inventories(c *handofftest.Cluster) []handofftest.Key {
	var out []handofftest.Key
	for _, k := range c.Keys() {
		if o, ok := c.Get(k); ok && o.GetLabels()[inventory.SetKindLabel] == inventory.SetKind {
			out = append(out, k)
		}
	}
	return out
}

// An operator without a set kind records each release in inventory
// ConfigMaps, applies it in place, and lets later Steps delete what only
// the previous release listed once the new one has rolled out; here on
// package handofftest's fake cluster, with nothing to roll out.
func ExampleInventory() {
	ctx := context.Background()
	c := handofftest.NewCluster()
	inv := inventory.Inventory{Namespace: "widgets-system", Component: "widget-a"}
	exec := inv.Executor(c.ClientFor("operator"), c.Mapper())
	release := map[string][]unstructured.Unstructured{
		"v1": {obj("v1", "ConfigMap", "widgets", "config"), obj("v1", "Secret", "widgets", "v1-only")},
		"v2": {obj("v1", "ConfigMap", "widgets", "config")},
	}
	apply := func(objs []unstructured.Unstructured) { // create or update
		for i := range objs {
			o := objs[i].DeepCopy()
			ri := c.ClientFor("operator").Resource(schema.GroupVersionResource{Version: "v1", Resource: strings.ToLower(o.GetKind()) + "s"}).Namespace(o.GetNamespace())
			live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			if err == nil {
				o.SetResourceVersion(live.GetResourceVersion())
				_, err = ri.Update(ctx, o, metav1.UpdateOptions{})
			} else {
				_, err = ri.Create(ctx, o, metav1.CreateOptions{})
			}
			if err != nil {
				fmt.Println(err)
			}
		}
	}
	for _, version := range []string{"v1", "v2"} {
		gen, err := inv.Generation(version, release[version])
		if err != nil {
			fmt.Println(err)
			return
		}
		for {
			res, err := exec.Step(ctx, gen.Desired)
			if err != nil {
				fmt.Println(err)
				return
			}
			objs := release[version]
			if err := inventory.Stamp(res.Family, version, objs); err != nil {
				fmt.Println(err)
				return
			}
			apply(objs)
			for _, it := range res.Deleted {
				fmt.Println("deleted", it.Ref)
			}
			if !res.Requeue {
				break
			}
		}
		fmt.Printf("%s installed\n", version)
	}
	for { // the component removed: every inventory retired
		res, err := exec.Step(ctx, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, it := range res.Deleted {
			fmt.Println("removed", it.Ref)
		}
		if !res.Requeue {
			break
		}
	}
	fmt.Println("inventories left:", len(inventories(c)))
	// Output:
	// v1 installed
	// deleted Secret widgets/v1-only
	// v2 installed
	// removed ConfigMap widgets/config
	// inventories left: 0
}
