package handoff_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	mf "github.com/manifestival/manifestival"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// The benchmarks run on one input per N: a family of three roles (static,
// deployment, statefulset) and two generations, v1 and v2, each listing N
// resources spread over the roles. v2 lists 90% of v1's resources (in the
// same role) and N/10 of its own, so N/10 of v1's resources are obsolete.
// The v1 sets are superseded, every set is Ready: the state in which a
// reconcile retires the old generation, the most work the pure core does.
//
// What is compared with what:
//
//   - BenchmarkFinalization is ours: the prune decision of a handoff, as the
//     executor makes it, [handoff.Finalization] of each of the three v1
//     sets against the whole family (six sets). Its output holds a verdict
//     for every v1 resource, N/10 of them Delete: the obsolete list.
//   - BenchmarkBaselineManifestival is (a): the same obsolete list computed
//     the manifestival way, old.Filter(mf.Not(mf.In(desired))) over the
//     manifests of all v1 and all v2 resources.
//   - BenchmarkBaselineFloor is (b): building a set of the v2 identities
//     (GroupKind, namespace, name) once and checking each v1 identity
//     against it, collecting the misses: the least that deciding the
//     obsolete list costs with a Go map keyed by Ref. It is a floor for
//     the map, not for the problem: an index built for the purpose
//     ([handoff.Finalizations] since issue 21) costs less, though it
//     returns a verdict for every v1 resource where the floor returns
//     only the misses.
//   - BenchmarkFinalizationsVsFloor times [handoff.Finalizations] and the
//     floor on the same input in every iteration, in alternating order, and
//     reports medians: on a shared machine, load that comes and goes falls
//     on both, where separate benchmarks run minutes apart. The medians
//     mostly leave garbage collection out (see the benchmark), so they
//     compare the work itself; the separate benchmarks include it.
//   - BenchmarkPlan is [handoff.Planner.Plan] on the six sets. The Planner
//     decides on sets, not resources: it never reads the resource lists, so
//     its cost depends on the number of sets and is flat in N. It has no
//     counterpart in the baselines.
//   - BenchmarkObserveAndPlan is the whole pure part of one Step:
//     [handoff.Family.ObserveAll] of the six listed set objects (which reads
//     every spec.manifests entry into a [handoff.Ref]) and Plan. This is
//     what a steady-state reconcile costs in CPU besides the List call.
//
// Inputs are built once per N, outside the timed loop, and shared by all
// benchmarks.

var benchSizes = []int{100, 1000, 10000, 100000}

var benchRoles = []string{"static", "deployment", "statefulset"}

var benchFamily = handoff.Family{
	Kind:            "TektonInstallerSet",
	Selector:        map[string]string{"operator.tekton.dev/created-by": "TektonPipeline", "operator.tekton.dev/type": "main"},
	GenerationLabel: "operator.tekton.dev/release-version",
	RoleLabel:       handoff.DefaultRoleLabel,
}

// benchKinds cycles through namespaced and cluster-scoped kinds of several
// groups, as a real component's manifests do.
var benchKinds = []struct{ apiVersion, kind string }{
	{"v1", "ConfigMap"},
	{"v1", "Secret"},
	{"v1", "ServiceAccount"},
	{"rbac.authorization.k8s.io/v1", "ClusterRole"},
	{"apps/v1", "Deployment"},
	{"v1", "Service"},
	{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"},
	{"rbac.authorization.k8s.io/v1", "RoleBinding"},
}

type benchInput struct {
	n        int
	obsolete int // how many v1 resources v2 does not list
	sets     []handoff.Set
	old      []handoff.Set // the three v1 sets
	desired  *handoff.Desired
	setObjs  []unstructured.Unstructured // the six sets as a List returns them
	oldRefs  []handoff.Ref
	newRefs  []handoff.Ref
	oldM     mf.Manifest
	newM     mf.Manifest
}

var (
	benchMu     sync.Mutex
	benchInputs = map[int]*benchInput{}
)

// benchFor returns the input for n, building it on first use.
func benchFor(b *testing.B, n int) *benchInput {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if in, ok := benchInputs[n]; ok {
		return in
	}
	in, err := buildBench(n)
	if err != nil {
		b.Fatal(err)
	}
	benchInputs[n] = in
	return in
}

// benchObject is resource i: index i of v1 runs from 0 to n-1, of v2 from
// n/10 to n+n/10-1; its role is i mod 3, so a shared resource keeps its role.
func benchObject(i int) unstructured.Unstructured {
	k := benchKinds[i%len(benchKinds)]
	u := unstructured.Unstructured{Object: map[string]any{"apiVersion": k.apiVersion, "kind": k.kind}}
	u.SetName(fmt.Sprintf("res-%07d", i))
	if !handoff.WellKnownClusterScoped(handoff.RefOf(&u).GroupKind()) {
		u.SetNamespace("bench-ns")
	}
	return u
}

func buildBench(n int) (*benchInput, error) {
	in := &benchInput{n: n, obsolete: n / 10}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	desired := &handoff.Desired{Generation: "v2"}
	var oldObjs, newObjs []unstructured.Unstructured
	for g, gen := range []string{"v1", "v2"} {
		first := g * in.obsolete
		byRole := make([][]unstructured.Unstructured, len(benchRoles))
		for i := first; i < first+n; i++ {
			u := benchObject(i)
			byRole[i%len(benchRoles)] = append(byRole[i%len(benchRoles)], u)
			if gen == "v1" {
				oldObjs = append(oldObjs, u)
				in.oldRefs = append(in.oldRefs, handoff.RefOf(&u))
			} else {
				newObjs = append(newObjs, u)
				in.newRefs = append(in.newRefs, handoff.RefOf(&u))
			}
		}
		for r, role := range benchRoles {
			name := fmt.Sprintf("pipeline-main-%s-%s", role, gen)
			refs := make([]handoff.Ref, 0, len(byRole[r]))
			manifests := make([]any, 0, len(byRole[r]))
			for i := range byRole[r] {
				refs = append(refs, handoff.RefOf(&byRole[r][i]))
				manifests = append(manifests, byRole[r][i].Object)
			}
			s := handoff.Set{
				Name: name, UID: types.UID("uid-" + name), Generation: gen, Role: role,
				Created:   t0.Add(time.Duration(g*len(benchRoles)+r) * time.Second),
				Readiness: handoff.Readiness{State: handoff.Ready},
				Resources: refs, Labels: map[string]string{},
			}
			for k, v := range benchFamily.Selector {
				s.Labels[k] = v
			}
			s.Labels[benchFamily.GenerationLabel] = gen
			s.Labels[benchFamily.RoleLabel] = role
			if gen == "v1" {
				s.SupersededBy = "v2"
				in.old = append(in.old, s)
			} else {
				role := handoff.Role{Name: role, Resources: refs}
				if r > 0 {
					role.After = []string{benchRoles[0]}
				}
				desired.Roles = append(desired.Roles, role)
			}
			in.sets = append(in.sets, s)

			obj := unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "operator.tekton.dev/v1alpha1", "kind": "TektonInstallerSet",
				"spec": map[string]any{"manifests": manifests},
				"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Ready", "status": "True"},
				}},
			}}
			obj.SetName(name)
			obj.SetUID(s.UID)
			obj.SetLabels(s.Labels)
			if s.SupersededBy != "" {
				obj.SetAnnotations(map[string]string{handoff.DefaultSupersededAnnotation: s.SupersededBy})
			}
			in.setObjs = append(in.setObjs, obj)
		}
	}
	in.desired = desired
	var err error
	if in.oldM, err = mf.ManifestFrom(mf.Slice(oldObjs)); err != nil {
		return nil, err
	}
	if in.newM, err = mf.ManifestFrom(mf.Slice(newObjs)); err != nil {
		return nil, err
	}
	// The ways must agree on the obsolete list before any is timed.
	if got := len(benchPrune(in)); got != in.obsolete {
		return nil, fmt.Errorf("N=%d: Finalization deletes %d, want %d", n, got, in.obsolete)
	}
	del := 0
	for _, d := range handoff.Finalizations(in.old, in.sets, handoff.DefaultPruneOptions()) {
		del += len(d.Of(handoff.Delete))
	}
	if del != in.obsolete {
		return nil, fmt.Errorf("N=%d: Finalizations delete %d, want %d", n, del, in.obsolete)
	}
	if got := len(in.oldM.Filter(mf.Not(mf.In(in.newM))).Resources()); got != in.obsolete {
		return nil, fmt.Errorf("N=%d: manifestival filter keeps %d, want %d", n, got, in.obsolete)
	}
	if got := len(benchFloor(in.oldRefs, in.newRefs)); got != in.obsolete {
		return nil, fmt.Errorf("N=%d: floor finds %d, want %d", n, got, in.obsolete)
	}
	return in, nil
}

// benchPrune is the handoff's prune decision, as Executor.Step makes it when it
// retires the old generation: Finalization of each old set against the
// family. It returns the resources to delete.
func benchPrune(in *benchInput) []handoff.Ref {
	opts := handoff.DefaultPruneOptions()
	var del []handoff.Ref
	for _, s := range in.old {
		for _, it := range handoff.Finalization(s, in.sets, opts).Of(handoff.Delete) {
			del = append(del, it.Ref)
		}
	}
	return del
}

// benchFloor builds the set of desired identities once and checks each old one.
func benchFloor(old, desired []handoff.Ref) []handoff.Ref {
	index := make(map[handoff.Ref]struct{}, len(desired))
	for _, r := range desired {
		index[r] = struct{}{}
	}
	var out []handoff.Ref
	for _, r := range old {
		if _, ok := index[r]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// benchEach runs fn as a sub-benchmark N=n for every size.
func benchEach(b *testing.B, fn func(b *testing.B, in *benchInput)) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			in := benchFor(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			fn(b, in)
		})
	}
}

var benchSink int

// BenchmarkFinalization is ours: the prune decision of a handoff, all
// three old sets, one verdict per old resource.
func BenchmarkFinalization(b *testing.B) {
	benchEach(b, func(b *testing.B, in *benchInput) {
		opts := handoff.DefaultPruneOptions()
		b.ResetTimer()
		for range b.N {
			for _, s := range in.old {
				benchSink += len(handoff.Finalization(s, in.sets, opts).Items)
			}
		}
	})
}

// BenchmarkFinalizations is ours as a Step makes it since issue 15: the
// decisions of all three old sets from one index over the family
// ([handoff.Finalizations]), a set decided earlier counting as deleted for
// the later ones.
func BenchmarkFinalizations(b *testing.B) {
	benchEach(b, func(b *testing.B, in *benchInput) {
		opts := handoff.DefaultPruneOptions()
		b.ResetTimer()
		for range b.N {
			for _, d := range handoff.Finalizations(in.old, in.sets, opts) {
				benchSink += len(d.Items)
			}
		}
	})
}

// BenchmarkFinalizationsVsFloor runs BenchmarkFinalizations' work and
// BenchmarkBaselineFloor's in each iteration, in alternating order, and
// reports the median time of each (ours-ns/op, floor-ns/op) and the median
// of their ratios (ours/floor). The medians are not moved by the few
// iterations in which a garbage collection runs, which fall on one or the
// other by chance; what collection costs grows with the bytes allocated,
// and the separate benchmarks, which pay it, report those.
func BenchmarkFinalizationsVsFloor(b *testing.B) {
	benchEach(b, func(b *testing.B, in *benchInput) {
		opts := handoff.DefaultPruneOptions()
		ours := func() {
			for _, d := range handoff.Finalizations(in.old, in.sets, opts) {
				benchSink += len(d.Items)
			}
		}
		floor := func() { benchSink += len(benchFloor(in.oldRefs, in.newRefs)) }
		timed := func(fn func()) float64 {
			start := time.Now()
			fn()
			return float64(time.Since(start).Nanoseconds())
		}
		var o, f, ratios []float64
		b.ResetTimer()
		for range b.N {
			if len(ratios)%2 == 0 {
				o, f = append(o, timed(ours)), append(f, timed(floor))
			} else {
				f, o = append(f, timed(floor)), append(o, timed(ours))
			}
			ratios = append(ratios, o[len(o)-1]/f[len(f)-1])
		}
		median := func(x []float64) float64 {
			slices.Sort(x)
			return x[len(x)/2]
		}
		b.ReportMetric(median(o), "ours-ns/op")
		b.ReportMetric(median(f), "floor-ns/op")
		b.ReportMetric(median(ratios), "ours/floor")
	})
}

// BenchmarkBaselineManifestival is baseline (a): manifestival's obsolete
// list, old minus desired by GroupKind, namespace and name.
func BenchmarkBaselineManifestival(b *testing.B) {
	benchEach(b, func(b *testing.B, in *benchInput) {
		b.ResetTimer()
		for range b.N {
			benchSink += len(in.oldM.Filter(mf.Not(mf.In(in.newM))).Resources())
		}
	})
}

// BenchmarkBaselineFloor is baseline (b): one identity set, one lookup per
// old resource.
func BenchmarkBaselineFloor(b *testing.B) {
	benchEach(b, func(b *testing.B, in *benchInput) {
		b.ResetTimer()
		for range b.N {
			benchSink += len(benchFloor(in.oldRefs, in.newRefs))
		}
	})
}

// BenchmarkPlan is the Planner on the six sets of the handoff: three
// retirements. Flat in N, since planning reads no resource list.
func BenchmarkPlan(b *testing.B) {
	benchEach(b, func(b *testing.B, in *benchInput) {
		p := handoff.Planner{Family: benchFamily}
		b.ResetTimer()
		for range b.N {
			plan, err := p.Plan(in.sets, in.desired)
			if err != nil {
				b.Fatal(err)
			}
			benchSink += len(plan.Actions)
		}
	})
}

// BenchmarkObserveAndPlan is the pure CPU of one Step after its List:
// reading the six set objects (every manifest entry) and planning.
func BenchmarkObserveAndPlan(b *testing.B) {
	benchEach(b, func(b *testing.B, in *benchInput) {
		p := handoff.Planner{Family: benchFamily}
		b.ResetTimer()
		for range b.N {
			sets, err := benchFamily.ObserveAll(in.setObjs)
			if err != nil {
				b.Fatal(err)
			}
			plan, err := p.Plan(sets, in.desired)
			if err != nil {
				b.Fatal(err)
			}
			benchSink += len(plan.Actions)
		}
	})
}
