// Package tektoncd shows handoff wired into tektoncd/operator, as the two
// call sites would read there, without importing tektoncd/operator (which
// would pull hundreds of modules). It works on operator.tekton.dev/v1alpha1
// TektonInstallerSets as unstructured objects, with tektoncd/operator's own
// label and annotation keys, role names, name prefixes and finalizer.
//
//   - [MainSet] replaces the body of pkg/reconciler/kubernetes/tektoninstallerset/client
//     MainSet: instead of ErrVersionDifferent → CleanupMainSet → create on a
//     later reconcile, it runs one handoff step.
//   - [FinalizeKind] replaces the deletion loop in the TektonInstallerSet
//     reconciler's FinalizeKind: it keeps what a successor lists.
//   - [Family] classifies the sets tektoncd/operator creates today with
//     GenerateName, whose role is only in their name.
package tektoncd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// tektoncd/operator's keys (pkg/apis/operator/v1alpha1/const.go).
const (
	LabelCreatedBy      = "operator.tekton.dev/created-by"
	LabelReleaseVersion = "operator.tekton.dev/release-version"
	LabelType           = "operator.tekton.dev/type"
	LabelInstallType    = "operator.tekton.dev/installType"
	AnnTargetNamespace  = "operator.tekton.dev/target-namespace"
	AnnLastAppliedHash  = "operator.tekton.dev/last-applied-hash"
	Finalizer           = "tektoninstallersets.operator.tekton.dev"

	RoleStatic      = "static"
	RoleDeployment  = "deployment"
	RoleStatefulSet = "statefulset"
)

// InstallerSets is the TektonInstallerSet resource.
var InstallerSets = schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"}

// prefix is "<kind>-main-": the kind lower-cased without "Tekton".
func prefix(kind string) string {
	return strings.ToLower(strings.TrimPrefix(kind, "Tekton")) + "-main-"
}

// Family is the family of a component's main sets, e.g. kind
// "TektonPipeline".
func Family(kind string) handoff.Family {
	p := prefix(kind)
	return handoff.Family{
		Resource:        InstallerSets,
		Kind:            "TektonInstallerSet",
		Selector:        map[string]string{LabelCreatedBy: kind, LabelType: "main"},
		GenerationLabel: LabelReleaseVersion,
		HashAnnotation:  AnnLastAppliedHash,
		NamePrefix:      p,
		// Sets made before handoff carry the role only in their name:
		// <kind>-main-<role>-<random>.
		RoleOf: func(u *unstructured.Unstructured) (string, bool) {
			for _, r := range []string{RoleStatic, RoleDeployment, RoleStatefulSet} {
				if strings.HasPrefix(u.GetName(), p+r+"-") {
					return r, true
				}
			}
			return "", false
		},
		TargetNamespace: func(u *unstructured.Unstructured) string { return u.GetAnnotations()[AnnTargetNamespace] },
	}
}

// Split divides a component's transformed manifest into roles the way
// tektoncd/operator does: Deployments and Services in the deployment set
// (or, on the StatefulSet path, StatefulSets with the same Deployments and
// Services in the statefulset set), everything else in the static set.
func Split(resources []unstructured.Unstructured, statefulSet bool) map[string][]unstructured.Unstructured {
	out := map[string][]unstructured.Unstructured{}
	workload := RoleDeployment
	if statefulSet {
		workload = RoleStatefulSet
	}
	for _, u := range resources {
		switch u.GetKind() {
		case "Deployment", "Service", "StatefulSet":
			out[workload] = append(out[workload], u)
		default:
			out[RoleStatic] = append(out[RoleStatic], u)
		}
	}
	return out
}

// Result is what MainSet tells its caller, who keeps its status marking:
// Ready → MarkInstallerSetReady, Requeue → MarkInstallerSetAvailable and
// requeue.
type Result string

// MainSet's results.
const (
	Ready   Result = "ready"
	Requeue Result = "requeue"
)

// Component is what tektoncd/operator has in hand in MainSet.
type Component struct {
	Kind string // e.g. TektonPipeline
	// ReleaseVersion is the operator release: the generation.
	ReleaseVersion string
	// TargetNamespace is where namespaced resources listed without a
	// namespace land.
	TargetNamespace string
	// Resources is the transformed manifest, mf.Manifest.Resources().
	Resources []unstructured.Unstructured
	// StatefulSet selects the statefulset role (tektoncd/operator's
	// statefulset-ordinals option) beside static and deployment.
	StatefulSet bool
}

// Executor returns the executor for a component's main sets.
func Executor(kind string, dyn dynamic.Interface, mapper meta.RESTMapper) *handoff.Executor {
	return &handoff.Executor{
		Family:    Family(kind),
		Dynamic:   dyn,
		Mapper:    mapper,
		Prune:     handoff.DefaultPruneOptions(),
		RoleOrder: []string{RoleStatic, RoleDeployment, RoleStatefulSet},
	}
}

// Desired builds the desired generation and the executor's Build function
// for a component: the static set first, the workload set once the static
// one is Ready, each with the hash tektoncd/operator stores in
// last-applied-hash.
func Desired(c Component) (*handoff.Desired, handoff.BuildFunc, error) {
	split := Split(c.Resources, c.StatefulSet)
	d := &handoff.Desired{Generation: c.ReleaseVersion}
	for _, role := range []string{RoleStatic, RoleDeployment, RoleStatefulSet} {
		objs, ok := split[role]
		if !ok {
			continue
		}
		h, err := hash(objs)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s role %s: %w", c.Kind, c.ReleaseVersion, role, err)
		}
		r := handoff.Role{Name: role, Hash: h}
		if role != RoleStatic {
			r.After = []string{RoleStatic}
		}
		for i := range objs {
			r.Resources = append(r.Resources, handoff.RefOf(&objs[i]))
		}
		d.Roles = append(d.Roles, r)
	}
	build := func(_ context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
		items := make([]any, 0, len(split[r.Name]))
		for _, u := range split[r.Name] {
			items = append(items, u.DeepCopy().Object)
		}
		set := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"manifests": items}}}
		set.SetAnnotations(map[string]string{AnnTargetNamespace: c.TargetNamespace})
		if r.Name != RoleStatic {
			set.SetLabels(map[string]string{LabelInstallType: r.Name})
		}
		return set, nil
	}
	return d, build, nil
}

func hash(objs []unstructured.Unstructured) (string, error) {
	h := sha256.New()
	for _, u := range objs {
		b, err := json.Marshal(u.Object)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// MainSet runs one handoff step for a component's main sets.
func MainSet(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, c Component) (Result, error) {
	desired, build, err := Desired(c)
	if err != nil {
		return "", err
	}
	exec := Executor(c.Kind, dyn, mapper)
	exec.Build = build
	res, err := exec.Step(ctx, desired)
	if err != nil {
		return "", err
	}
	if res.Requeue {
		return Requeue, nil
	}
	return Ready, nil
}

// FinalizeKind is the TektonInstallerSet finalizer for a main set: it keeps
// what a successor lists and deletes only what no other set lists. Sets
// outside a main family (the type label is not "main") keep
// tektoncd/operator's existing finalizer.
func FinalizeKind(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, set *unstructured.Unstructured) (handoff.FinalizeResult, error) {
	kind := set.GetLabels()[LabelCreatedBy]
	if kind == "" || set.GetLabels()[LabelType] != "main" {
		return handoff.FinalizeResult{}, fmt.Errorf("set %q: %w: not a main set of a component", set.GetName(), handoff.ErrInvalidSet)
	}
	return Executor(kind, dyn, mapper).Finalize(ctx, set)
}
