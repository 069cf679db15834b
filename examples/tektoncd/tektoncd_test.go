package tektoncd

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func resources(m map[string][]*unstructured.Unstructured) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, role := range []string{"static", "deployment"} {
		for _, u := range m[role] {
			out = append(out, *u)
		}
	}
	return out
}

func TestSplitPutsWorkloadsInTheirRole(t *testing.T) {
	objs := resources(handofftest.Pipelines("tekton-pipelines", "v1"))
	for _, sts := range []bool{false, true} {
		split := Split(objs, sts)
		workload := RoleDeployment
		if sts {
			workload = RoleStatefulSet
		}
		for _, u := range split[workload] {
			if k := u.GetKind(); k != "Deployment" && k != "Service" && k != "StatefulSet" {
				t.Errorf("statefulset=%v: %s in %s set", sts, k, workload)
			}
		}
		for _, u := range split[RoleStatic] {
			if k := u.GetKind(); k == "Deployment" || k == "Service" {
				t.Errorf("statefulset=%v: %s in static set", sts, k)
			}
		}
		if got := len(split[RoleStatic]) + len(split[workload]); got != len(objs) {
			t.Errorf("statefulset=%v: %d resources split, want %d", sts, got, len(objs))
		}
	}
}

func TestFamilyClassifiesGenerateNameSets(t *testing.T) {
	fam := Family("TektonPipeline")
	for name, want := range map[string]string{
		"pipeline-main-static-x7k2p":      RoleStatic,
		"pipeline-main-deployment-q9w8e":  RoleDeployment,
		"pipeline-main-statefulset-a1b2c": RoleStatefulSet,
	} {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		u.SetUID("u")
		u.SetLabels(map[string]string{LabelCreatedBy: "TektonPipeline", LabelType: "main", LabelReleaseVersion: "v0.79.0"})
		s, err := fam.Observe(u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Role != want {
			t.Errorf("%s: role %q, want %q", name, s.Role, want)
		}
	}
}

// An existing cluster with sets made the old way (GenerateName, role only in
// the name) is upgraded through MainSet: the old sets are adopted, retired
// only after the new ones are Ready, and no shared resource is ever absent.
func TestMainSetAdoptsLegacySetsAndUpgradesWithoutGap(t *testing.T) {
	ctx := context.Background()
	c := handofftest.NewCluster()
	c.Register(InstallerSets, "TektonInstallerSet", false)
	dyn := c.ClientFor("operator")
	v1 := handofftest.Pipelines("tekton-pipelines", "v0.79.0")
	v2 := handofftest.Pipelines("tekton-pipelines", "v0.80.0")

	// The sets as tektoncd/operator creates them today.
	for _, role := range []string{"static", "deployment"} {
		items := []any{}
		for _, u := range v1[role] {
			items = append(items, u.DeepCopy().Object)
		}
		set := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.tekton.dev/v1alpha1", "kind": "TektonInstallerSet",
			"spec": map[string]any{"manifests": items}}}
		set.SetGenerateName("pipeline-main-" + role + "-")
		set.SetLabels(map[string]string{LabelCreatedBy: "TektonPipeline", LabelType: "main", LabelReleaseVersion: "v0.79.0"})
		if _, err := dyn.Resource(InstallerSets).Create(ctx, set, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctrl := &handofftest.SetController{Executor: Executor("TektonPipeline", c.ClientFor("controller"), c.Mapper()),
		Client: c.ClientFor("controller"), Mapper: c.Mapper(), Finalizer: Finalizer, ReadyAfter: 1,
		Unowned: handoff.DefaultPruneOptions().Unowned}
	for range 3 {
		if err := ctrl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}

	start := c.Now()
	comp := Component{Kind: "TektonPipeline", ReleaseVersion: "v0.80.0", TargetNamespace: "tekton-pipelines", Resources: resources(v2)}
	var results []Result
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatalf("not ready after 20 reconciles: %v", results)
		}
		r, err := MainSet(ctx, dyn, c.Mapper(), comp)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
		if err := ctrl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if r == Ready {
			break
		}
	}
	if results[0] != Requeue {
		t.Errorf("first reconcile of an upgrade returned %q, want %q", results[0], Requeue)
	}

	var shared []handofftest.Key
	newKeys := map[handofftest.Key]bool{}
	for _, u := range comp.Resources {
		newKeys[handofftest.KeyOf(&u)] = true
	}
	for _, u := range resources(v1) {
		if k := handofftest.KeyOf(&u); newKeys[k] {
			shared = append(shared, k)
		} else if c.Exists(k) {
			t.Errorf("%s listed only by v0.79.0 still exists", k)
		}
	}
	if gaps := c.Gaps(shared, start, c.Now()); len(gaps) != 0 {
		t.Errorf("shared resources absent during the upgrade: %v", gaps)
	}
	d, _, err := Desired(comp)
	if err != nil {
		t.Fatal(err)
	}
	if err := handofftest.CheckConverged(c, Family("TektonPipeline"), d); err != nil {
		t.Error(err)
	}
}

func TestFinalizeKindRefusesSetsOutsideAMainFamily(t *testing.T) {
	set := &unstructured.Unstructured{}
	set.SetName("pipeline-pre-xyz")
	set.SetLabels(map[string]string{LabelCreatedBy: "TektonPipeline", LabelType: "pre"})
	_, err := FinalizeKind(context.Background(), nil, nil, set)
	if diff := cmp.Diff(true, err != nil && errors.Is(err, handoff.ErrInvalidSet)); diff != "" {
		t.Errorf("FinalizeKind(pre set) error %v, want ErrInvalidSet", err)
	}
}
