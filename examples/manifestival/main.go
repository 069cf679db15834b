// Command manifestival shows handoff in a generic, manifestival-based
// operator that has nothing to do with Tekton: a guestbook operator that
// installs its component through Bundle objects (apps.example.com/v1,
// cluster-scoped) and upgrades it from v1 to v2 with no availability gap.
//
//	go run ./examples/manifestival
//
// runs the upgrade on the fake cluster of package handofftest, prints every
// plan, and ends with a summary: shared resources kept, obsolete pruned,
// new created, and the availability gap (0).
//
// The manifests are plain YAML files embedded in the binary
// (manifests/v1/*.yaml, manifests/v2/*.yaml), read with
// [mf.ManifestFrom] and [mf.Reader], and given their namespace with
// [mf.InjectNamespace], as a manifestival operator does with its kodata.
//
// What a generic operator writes to use the library:
//
//  1. A [handoff.Family]: the set kind's resource and Kind, the labels all
//     of the component's sets carry (Selector), the label holding the
//     generation (the operator's release), and its own role label, hash
//     annotation, superseded annotation and name prefix. Here the sets list
//     their resources under spec.resources rather than spec.manifests, and
//     readiness is an "Installed" condition, so the family says so with
//     Family.Resources and Family.Probe. See [family].
//  2. The desired generation: its roles in dependency order, each with the
//     identities of its resources and a content hash ([handoff.NewRole]).
//     Here there are three roles, split from one manifest with manifestival
//     filters: crds, config (after crds) and workloads (after config). See
//     [desired].
//  3. A [handoff.BuildFunc] that makes the set of one role (the executor
//     names it and adds the family's labels), given with the generation
//     (Desired.Build), so one executor serves every generation. See
//     [generation.build].
//  4. The component reconciler calls [handoff.Executor.Step] once per
//     reconcile and requeues while Result.Requeue is true.
//  5. The set controller (see [bundleController]) keeps the contract: a
//     finalizer on every set that calls [handoff.Executor.Finalize] instead
//     of deleting every listed resource; the guard asked before every
//     write ([handoff.ManifestivalGuard]), and a resource left alone when
//     it says no; a
//     controller ownerReference ([handoff.Family.OwnerReference]) on the
//     resources it installs, except CRDs, Namespaces and admission webhook
//     configurations; and a Ready (here: Installed) condition written
//     together with status.observedGeneration.
package main

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	mf "github.com/manifestival/manifestival"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The guestbook operator's own keys.
const (
	labelComponent = "apps.example.com/component"
	labelVersion   = "apps.example.com/version"
	labelRole      = "apps.example.com/role"
	annHash        = "apps.example.com/spec-hash"
	annSuperseded  = "apps.example.com/superseded-by"
	finalizer      = "bundles.apps.example.com/finalizer"
	conditionReady = "Installed"

	component = "guestbook"
	namespace = "guestbook"
)

// The roles of a generation, in dependency order.
const (
	roleCRDs      = "crds"
	roleConfig    = "config"
	roleWorkloads = "workloads"
)

// bundles is the guestbook operator's set kind.
var bundles = schema.GroupVersionResource{Group: "apps.example.com", Version: "v1", Resource: "bundles"}

//go:embed manifests
var manifests embed.FS

// family is the guestbook component's family of Bundles.
func family() handoff.Family {
	return handoff.Family{
		Resource:             bundles,
		Kind:                 "Bundle",
		Selector:             map[string]string{labelComponent: component},
		GenerationLabel:      labelVersion,
		RoleLabel:            labelRole,
		HashAnnotation:       annHash,
		SupersededAnnotation: annSuperseded,
		NamePrefix:           component + "-",
		Resources: func(u *unstructured.Unstructured) ([]handoff.Ref, error) {
			return handoff.Manifests(u, "spec", "resources")
		},
		Probe: handoff.ConditionProbe{Type: conditionReady},
	}
}

// load reads the embedded manifests of one version with manifestival and
// puts the namespaced resources into namespace.
func load(version string) (mf.Manifest, error) {
	files, err := fs.Glob(manifests, path.Join("manifests", version, "*.yaml"))
	if err != nil {
		return mf.Manifest{}, err
	}
	if len(files) == 0 {
		return mf.Manifest{}, fmt.Errorf("no manifests for version %s", version)
	}
	all, err := mf.ManifestFrom(mf.Slice(nil))
	if err != nil {
		return mf.Manifest{}, err
	}
	for _, f := range files {
		data, err := manifests.ReadFile(f)
		if err != nil {
			return mf.Manifest{}, err
		}
		m, err := mf.ManifestFrom(mf.Reader(bytes.NewReader(data)))
		if err != nil {
			return mf.Manifest{}, fmt.Errorf("%s: %w", f, err)
		}
		all = all.Append(m)
	}
	return all.Transform(mf.InjectNamespace(namespace))
}

// split divides a manifest into the three roles with manifestival filters.
func split(m mf.Manifest) map[string]mf.Manifest {
	crds := mf.ByKind("CustomResourceDefinition")
	workloads := mf.Any(mf.ByKind("Deployment"), mf.ByKind("Service"), mf.ByKind("PodDisruptionBudget"))
	return map[string]mf.Manifest{
		roleCRDs:      m.Filter(crds),
		roleConfig:    m.Filter(mf.Not(mf.Any(crds, workloads))),
		roleWorkloads: m.Filter(workloads),
	}
}

// generation is one loaded version, split into roles.
type generation struct {
	desired *handoff.Desired
	roles   map[string]mf.Manifest
}

// desired loads a version and describes it as a desired generation,
// which builds its own Bundles.
func desired(version string) (generation, error) {
	m, err := load(version)
	if err != nil {
		return generation{}, err
	}
	g := generation{desired: &handoff.Desired{Generation: version}, roles: split(m)}
	g.desired.Build = g.build
	after := map[string][]string{roleConfig: {roleCRDs}, roleWorkloads: {roleConfig}}
	for _, name := range []string{roleCRDs, roleConfig, roleWorkloads} {
		role, err := handoff.NewRole(name, g.roles[name].Resources(), after[name]...)
		if err != nil {
			return generation{}, err
		}
		g.desired.Roles = append(g.desired.Roles, role)
	}
	return g, nil
}

// build is the generation's BuildFunc: the Bundle of one role lists the
// role's resources under spec.resources.
func (g generation) build(_ context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
	if d.Generation != g.desired.Generation {
		return nil, fmt.Errorf("no manifests for generation %s", d.Generation)
	}
	res := g.roles[r.Name].Resources()
	items := make([]any, 0, len(res))
	for i := range res {
		items = append(items, res[i].DeepCopy().Object)
	}
	return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"resources": items}}}, nil
}

// demo is the guestbook operator running on a fake cluster.
type demo struct {
	cluster *handofftest.Cluster
	family  handoff.Family
	exec    *handoff.Executor
	ctrl    *bundleController
	gens    map[string]generation
	plans   io.Writer
	// rounds bounds each convergence.
	rounds int
}

func newDemo(plans io.Writer, versions ...string) (*demo, error) {
	if plans == nil {
		plans = io.Discard
	}
	c := handofftest.NewCluster()
	c.Register(bundles, "Bundle", false)
	d := &demo{cluster: c, family: family(), gens: map[string]generation{}, plans: plans, rounds: 30}
	for _, v := range versions {
		g, err := desired(v)
		if err != nil {
			return nil, err
		}
		d.gens[v] = g
	}
	prune := handoff.DefaultPruneOptions()
	d.exec = &handoff.Executor{
		Family: d.family, Dynamic: c.ClientFor("operator"), Mapper: c.Mapper(),
		Prune:     prune,
		RoleOrder: []string{roleCRDs, roleConfig, roleWorkloads},
	}
	finalizing := *d.exec
	finalizing.Dynamic = c.ClientFor("bundle-controller")
	d.ctrl = &bundleController{
		exec: &finalizing, client: c.ClientFor("bundle-controller"), mapper: c.Mapper(),
		unowned: append([]schema.GroupKind{{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, {Kind: "Namespace"}}, prune.Unowned...),
	}
	return d, nil
}

// converge reconciles, the operator then the Bundle controller, until the
// plan is settled; it checks after every round that no old Bundle was
// retired before the new ones were Ready (handofftest.Gate).
func (d *demo) converge(ctx context.Context, version string, max int) (int, error) {
	want := d.gens[version].desired
	var gate handofftest.Gate
	if err := gate.Observe(d.cluster, d.family, *want); err != nil { // before the first round
		return 0, err
	}
	var last error
	for round := 1; round <= max; round++ {
		res, err := d.exec.Step(ctx, want)
		if res.Plan.Phase != "" {
			fmt.Fprint(d.plans, res.Plan)
		}
		if cerr := d.ctrl.reconcile(ctx); cerr != nil && err == nil {
			err = cerr
		}
		if gerr := gate.Observe(d.cluster, d.family, *want); gerr != nil {
			return round, gerr
		}
		if err != nil {
			last = err
			continue
		}
		if !res.Requeue {
			return round, nil
		}
	}
	return max, fmt.Errorf("%s not converged after %d rounds: %w", version, max, last)
}

// summary is what the upgrade did to the component's resources.
type summary struct {
	from, to                 string
	rounds                   int
	shared, obsolete, added  []handofftest.Key
	keptShared, pruned, made int
	gaps                     []handofftest.Gap
	sets                     []string
}

func (s summary) String() string {
	return fmt.Sprintf(`== handoff (manifestival guestbook, %s -> %s): %d reconciles
   shared resources (listed by both generations): %d, never absent: %d
   obsolete resources (only in %s): %d, pruned: %d
   new resources (only in %s): %d, created: %d
   availability gap: %d absences of shared resources
   bundles left: %s
`, s.from, s.to, s.rounds,
		len(s.shared), s.keptShared,
		s.from, len(s.obsolete), s.pruned,
		s.to, len(s.added), s.made,
		len(s.gaps), strings.Join(s.sets, ", "))
}

func keysOf(g generation) map[handofftest.Key]bool {
	out := map[handofftest.Key]bool{}
	for _, m := range g.roles {
		for _, r := range m.Resources() {
			out[handofftest.KeyOf(&r)] = true
		}
	}
	return out
}

// upgrade installs from, upgrades to to, and checks and summarizes the
// upgrade.
func (d *demo) upgrade(ctx context.Context, from, to string) (summary, error) {
	fmt.Fprintf(d.plans, "# install %s\n", from)
	if _, err := d.converge(ctx, from, d.rounds); err != nil {
		return summary{}, err
	}
	if err := handofftest.CheckConverged(d.cluster, d.family, d.gens[from].desired); err != nil {
		return summary{}, err
	}
	s := summary{from: from, to: to}
	oldKeys, newKeys := keysOf(d.gens[from]), keysOf(d.gens[to])
	for k := range oldKeys {
		if newKeys[k] {
			s.shared = append(s.shared, k)
		} else {
			s.obsolete = append(s.obsolete, k)
		}
	}
	for k := range newKeys {
		if !oldKeys[k] {
			s.added = append(s.added, k)
		}
	}
	fmt.Fprintf(d.plans, "\n# upgrade to %s\n", to)
	start := d.cluster.Now()
	var err error
	if s.rounds, err = d.converge(ctx, to, d.rounds); err != nil {
		return s, err
	}
	if err := handofftest.CheckConverged(d.cluster, d.family, d.gens[to].desired); err != nil {
		return s, err
	}
	s.gaps = d.cluster.Gaps(s.shared, start, d.cluster.Now())
	absent := map[handofftest.Key]bool{}
	for _, g := range s.gaps {
		absent[g.Key] = true
	}
	s.keptShared = len(s.shared) - len(absent)
	for _, k := range s.obsolete {
		if !d.cluster.Exists(k) {
			s.pruned++
		}
	}
	for _, k := range s.added {
		if d.cluster.Exists(k) {
			s.made++
		}
	}
	for _, o := range d.cluster.Objects() {
		if o.GetKind() == d.family.Kind && d.family.Contains(o.GetLabels()) {
			lbls := o.GetLabels()
			s.sets = append(s.sets, fmt.Sprintf("%s (%s/%s)", o.GetName(), lbls[labelVersion], lbls[labelRole]))
		}
	}
	slices.Sort(s.sets)
	return s, nil
}

func main() {
	ctx := context.Background()
	d, err := newDemo(os.Stdout, "v1", "v2")
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifestival:", err)
		os.Exit(1)
	}
	s, err := d.upgrade(ctx, "v1", "v2")
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifestival:", err)
		os.Exit(1)
	}
	fmt.Println()
	fmt.Print(s)
}
