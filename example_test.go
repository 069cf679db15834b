package handoff_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

var family = handoff.Family{
	Kind:            "TektonInstallerSet",
	Selector:        map[string]string{"operator.tekton.dev/created-by": "TektonPipeline", "operator.tekton.dev/type": "main"},
	GenerationLabel: "operator.tekton.dev/release-version",
}

// set builds an observed set by hand, as Family.Observe would return it.
func set(name, gen, role string, created int, state handoff.State, refs ...handoff.Ref) handoff.Set {
	return handoff.Set{
		Name: name, UID: types.UID("uid-" + name), Generation: gen, Role: role,
		Created:   time.Date(2026, 1, 1, 0, 0, created, 0, time.UTC),
		Readiness: handoff.Readiness{State: state},
		Labels:    family.Selector, Resources: refs,
	}
}

// An upgrade from v1 to v2, shown as the plans of successive reconciles.
func ExamplePlanner_Plan() {
	p := handoff.Planner{Family: family}
	v2 := &handoff.Desired{Generation: "v2", Roles: []handoff.Role{
		{Name: "static"},
		{Name: "deployment", After: []string{"static"}},
	}}
	oldStatic := set("static-v1", "v1", "static", 1, handoff.Ready)
	oldDeploy := set("deployment-v1", "v1", "deployment", 2, handoff.Ready)

	plan, _ := p.Plan([]handoff.Set{oldStatic, oldDeploy}, v2)
	fmt.Print(plan)

	oldStatic.SupersededBy, oldDeploy.SupersededBy = "v2", "v2"
	newStatic := set("static-v2", "v2", "static", 3, handoff.Ready)
	newDeploy := set("deployment-v2", "v2", "deployment", 4, handoff.NotReady)
	plan, _ = p.Plan([]handoff.Set{oldStatic, oldDeploy, newStatic, newDeploy}, v2)
	fmt.Print(plan)

	newDeploy.Readiness.State = handoff.Ready
	plan, _ = p.Plan([]handoff.Set{oldStatic, oldDeploy, newStatic, newDeploy}, v2)
	fmt.Print(plan)

	plan, _ = p.Plan([]handoff.Set{newStatic, newDeploy}, v2)
	fmt.Print(plan)
	// Output:
	// phase Upgrade, desired generation v2
	//   ACTION     GENERATION  ROLE        SET            REASON
	//   Supersede  v1          static      static-v1      generation v2 is desired
	//   Supersede  v1          deployment  deployment-v1  generation v2 is desired
	//   Create     v2          static      -              missing
	//   Wait       v2          deployment  -              waits for role static to be Ready
	// phase Upgrade, desired generation v2
	//   ACTION  GENERATION  ROLE        SET            REASON
	//   Wait    v2          deployment  deployment-v2  NotReady
	// phase Handoff, desired generation v2
	//   ACTION  GENERATION  ROLE        SET            REASON
	//   Retire  v1          deployment  deployment-v1  superseded by generation v2, which is Ready
	//   Retire  v1          static      static-v1      superseded by generation v2, which is Ready
	// phase Steady, desired generation v2
	//   nothing to do
}

// The executor, driven once per reconcile against the fake cluster of
// package handofftest, with its simulated set controller.
func ExampleExecutor_Step() {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	manifests := func(gen string) map[string][]*unstructured.Unstructured {
		cm := func(name string) *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"data": map[string]any{"version": gen}}}
			u.SetNamespace("tekton-pipelines")
			u.SetName(name)
			return u
		}
		return map[string][]*unstructured.Unstructured{"static": {cm("config-shared"), cm("config-" + gen)}}
	}
	v1 := w.Desire("v1", []string{"static"}, manifests("v1"))
	v2 := w.Desire("v2", []string{"static"}, manifests("v2"))
	if _, err := w.Converge(ctx, v1, 10); err != nil {
		fmt.Println(err)
		return
	}
	for {
		res, err := w.Round(ctx, v2)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Plan.Phase, res.Writes)
		if !res.Requeue {
			break
		}
	}
	for _, name := range []string{"config-shared", "config-v1", "config-v2"} {
		fmt.Println(name, w.Cluster.Exists(handofftest.Key{Kind: "ConfigMap", Namespace: "tekton-pipelines", Name: name}))
	}
	// Output:
	// Upgrade [patch tektoninstallersets component-main-static-3bfc269594 create tektoninstallersets component-main-static-fb04dcb697]
	// Upgrade []
	// Handoff [delete tektoninstallersets component-main-static-3bfc269594]
	// Steady []
	// config-shared true
	// config-v1 false
	// config-v2 true
}
