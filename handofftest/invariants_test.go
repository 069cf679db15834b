package handofftest_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/handofftest/tektonfixture"
	"github.com/kube-handoff/handoff/inventory"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestGateCheck(t *testing.T) {
	set := func(name, gen, role string, ready, deleting bool) handoff.Set {
		s := handoff.Set{Name: name, Generation: gen, Role: role, Deleting: deleting, Readiness: handoff.Readiness{State: handoff.NotReady}}
		if ready {
			s.Readiness.State = handoff.Ready
		}
		return s
	}
	v2 := handoff.Desired{Generation: "v2", Roles: []handoff.Role{{Name: "static"}, {Name: "deployment"}}}
	old := []handoff.Set{set("a1", "v1", "static", true, false), set("b1", "v1", "deployment", true, false)}
	invalid := func(s handoff.Set) handoff.Set {
		s.Invalid = &handoff.SetError{Name: s.Name, Err: handoff.ErrInvalidSet}
		return s
	}
	for name, tc := range map[string]struct {
		rounds  [][]handoff.Set // the sets before the first round, then after each round
		wantErr bool            // from the last round
	}{
		"old set retired in the first round, nothing desired Ready": {
			rounds:  [][]handoff.Set{old, {old[0], set("b1", "v1", "deployment", true, true), set("a2", "v2", "static", false, false)}},
			wantErr: true,
		},
		"a desired set that cannot be read whole is not Ready": {
			rounds: [][]handoff.Set{append(old, set("a2", "v2", "static", true, false), invalid(set("b2", "v2", "deployment", true, false))),
				{old[0], set("a2", "v2", "static", true, false), invalid(set("b2", "v2", "deployment", true, false))}},
			wantErr: true,
		},
		"a set that cannot be read whole is watched as old": {
			rounds:  [][]handoff.Set{append(old, invalid(set("x", "", "", false, false))), old},
			wantErr: true,
		},
		"old set retired while a desired set is not Ready": {
			rounds:  [][]handoff.Set{append(old, set("a2", "v2", "static", true, false), set("b2", "v2", "deployment", false, false)), {old[0], set("b1", "v1", "deployment", true, true)}},
			wantErr: true,
		},
		"old set vanished while a desired set is not Ready": {
			rounds:  [][]handoff.Set{append(old, set("a2", "v2", "static", false, false)), {old[0]}},
			wantErr: true,
		},
		"old sets retired once every desired role is Ready": {
			rounds: [][]handoff.Set{append(old, set("a2", "v2", "static", true, false), set("b2", "v2", "deployment", true, false)),
				{set("a1", "v1", "static", true, true), set("a2", "v2", "static", true, false), set("b2", "v2", "deployment", true, false)}},
		},
		"a set of a role the desired generation drops counts as old": {
			rounds:  [][]handoff.Set{{set("a2", "v2", "static", true, false), set("c2", "v2", "extra", true, false)}, {set("a2", "v2", "static", true, false)}},
			wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var g handofftest.Gate
			var err error
			for i, sets := range tc.rounds {
				err = g.Check(sets, v2)
				if i < len(tc.rounds)-1 && err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("last round: error %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// Observe reads every set of the family on the cluster, those that cannot
// be read whole included, without failing on them.
func TestGateObserveUnreadableSet(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	v1 := w.Desire("v1", []string{"static"}, tektonfixture.Pipelines("tekton-pipelines", "v1"))
	if _, err := w.Converge(ctx, v1, 30); err != nil {
		t.Fatal(err)
	}
	lbls := maps.Clone(w.Family.Selector)
	lbls[w.Family.GenerationLabel] = "v0" // no role
	if err := w.Cluster.Add(handofftest.Object("operator.tekton.dev/v1alpha1", "TektonInstallerSet", "", "unreadable", lbls, nil)); err != nil {
		t.Fatal(err)
	}
	var g handofftest.Gate
	for round := range 2 {
		if err := g.Observe(w.Cluster, w.Family, *v1); err != nil {
			t.Errorf("observation %d: %v", round, err)
		}
	}
}

// The checks judge an inventory family (no set controller, readiness read
// from the rollout of what each inventory lists) as the executor does:
// converged once what the inventory lists is applied for it and rolled
// out, not before; and the gate watches its handoff without taking an
// inventory for NotReady for good.
func TestChecksOfAnInventoryFamily(t *testing.T) {
	ctx := context.Background()
	c := handofftest.NewCluster()
	dyn := c.ClientFor("operator")
	inv := inventory.Inventory{Namespace: "knative-operator", Component: "knative-serving"}
	fam := inv.Family()
	exec := &handoff.Executor{Family: fam, Sets: inv.Sets(dyn), Dynamic: dyn, Mapper: c.Mapper(), Prune: handoff.DefaultPruneOptions()}
	exec.Prune.AnyUnowned = true
	deployments := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace("knative-serving")
	release := func(gen string) []unstructured.Unstructured {
		return []unstructured.Unstructured{
			*handofftest.Object("apps/v1", "Deployment", "knative-serving", "controller", nil, map[string]any{"spec": map[string]any{"image": gen}}),
			*handofftest.Object("v1", "ConfigMap", "knative-serving", "config-"+gen, nil, nil),
		}
	}
	// reconcile is a Step, then the operator's stamped apply and, with
	// rollOut, the deployment controller's rollout.
	reconcile := func(gen string, rollOut bool) (*handoff.Desired, handoff.Result) {
		t.Helper()
		g, err := inv.Generation(gen, release(gen))
		if err != nil {
			t.Fatal(err)
		}
		exec.Build = g.Build
		res, err := exec.Step(ctx, g.Desired)
		if err != nil {
			t.Fatal(err)
		}
		list, err := inv.Sets(dyn).List(ctx, metav1.ListOptions{LabelSelector: fam.LabelSelector().String()})
		if err != nil {
			t.Fatal(err)
		}
		family, _ := fam.ObserveAll(list.Items)
		objs := release(gen)
		if err := inventory.Stamp(family, gen, objs); err != nil {
			t.Fatal(err)
		}
		for i := range objs {
			ri := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("knative-serving")
			if objs[i].GetKind() == "Deployment" {
				ri = deployments
			}
			if live, err := ri.Get(ctx, objs[i].GetName(), metav1.GetOptions{}); err == nil {
				objs[i].SetResourceVersion(live.GetResourceVersion())
				_, err = ri.Update(ctx, &objs[i], metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			} else if _, err := ri.Create(ctx, &objs[i], metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if rollOut {
			d, err := deployments.Get(ctx, "controller", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d.Object["status"] = map[string]any{"observedGeneration": d.GetGeneration(), "replicas": int64(1), "updatedReplicas": int64(1),
				"availableReplicas": int64(1), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}}
			if _, err := deployments.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return g.Desired, res
	}

	v1, _ := reconcile("v1", false)
	if err := handofftest.CheckConverged(c, fam, v1); err == nil || !strings.Contains(err.Error(), "Deployment knative-serving/controller") {
		t.Errorf("CheckConverged before the rollout = %v, want the Deployment named", err)
	}
	reconcile("v1", true)
	if err := handofftest.CheckConverged(c, fam, v1); err != nil {
		t.Errorf("CheckConverged once rolled out: %v", err)
	}

	// The handoff to v2, watched by the gate.
	var g handofftest.Gate
	v2, _ := reconcile("v2", false)
	if err := g.Observe(c, fam, *v2); err != nil {
		t.Fatal(err)
	}
	settled := false
	for round := 0; round < 6 && !settled; round++ {
		_, res := reconcile("v2", round > 0)
		if err := g.Observe(c, fam, *v2); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		settled = !res.Requeue
	}
	if !settled {
		t.Fatal("v2 did not settle")
	}
	if err := handofftest.CheckConverged(c, fam, v2); err != nil {
		t.Errorf("CheckConverged after v2: %v", err)
	}
}
