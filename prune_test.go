package handoff_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

const prNS = "tekton-pipelines"

var (
	prCM      = func(name string) handoff.Ref { return handoff.Ref{Kind: "ConfigMap", Namespace: prNS, Name: name} }
	prDeploy  = handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: prNS, Name: "tekton-pipelines-controller"}
	prSvc     = handoff.Ref{Kind: "Service", Namespace: prNS, Name: "tekton-pipelines-controller"}
	prSTS     = handoff.Ref{Group: "apps", Kind: "StatefulSet", Namespace: prNS, Name: "tekton-pipelines-controller"}
	prNSRef   = handoff.Ref{Kind: "Namespace", Name: prNS}
	prPVC     = handoff.Ref{Kind: "PersistentVolumeClaim", Namespace: prNS, Name: "data"}
	prCRD     = handoff.Ref{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "tasks.tekton.dev"}
	prHook    = handoff.Ref{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "validation.webhook.pipeline.tekton.dev"}
	prRole    = handoff.Ref{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "tekton-pipelines-controller"}
	prSecret  = handoff.Ref{Kind: "Secret", Namespace: prNS, Name: "webhook-certs"}
	prOptions = handoff.DefaultPruneOptions()
)

// prSet builds an observed set by hand; created orders sets by age.
func prSet(name, gen, role string, created int, refs ...handoff.Ref) handoff.Set {
	return handoff.Set{
		Name: name, UID: types.UID("uid-" + name), Generation: gen, Role: role,
		Created:   time.Date(2026, 1, 1, 0, 0, created, 0, time.UTC),
		Resources: refs,
	}
}

func prDeleting(s handoff.Set) handoff.Set   { s.Deleting = true; return s }
func prSuperseded(s handoff.Set) handoff.Set { s.SupersededBy = "v2"; return s }

func prKeep(r handoff.Ref, by handoff.Set) handoff.Item {
	return handoff.Item{Ref: r, Verdict: handoff.Keep, Successor: by.Name, SuccessorUID: by.UID,
		Reason: "listed by " + by.Name + " (" + by.Generation + "/" + by.Role + ")"}
}

func prDelete(r handoff.Ref) handoff.Item {
	return handoff.Item{Ref: r, Verdict: handoff.Delete, Reason: "listed by no other set"}
}

func prProtected(r handoff.Ref) handoff.Item {
	return handoff.Item{Ref: r, Verdict: handoff.Skip, Reason: "protected kind"}
}

func TestPruneFinalization(t *testing.T) {
	oldStatic := prSet("static-v1", "v1", "static", 1, prCM("config-defaults"), prCM("config-v1-only"), prHook, prRole)
	newStatic := prSet("static-v2", "v2", "static", 10, prCM("config-defaults"), prHook, prRole, prCM("config-v2-only"))
	oldDeploy := prSet("deployment-v1", "v1", "deployment", 2, prDeploy, prSvc)
	oldSTS := prSet("statefulset-v1", "v1", "statefulset", 3, prSTS, prDeploy, prSvc)
	newDeploy := prSet("deployment-v2", "v2", "deployment", 11, prDeploy)
	custom := handoff.PruneOptions{Protected: []schema.GroupKind{{Kind: "Secret"}, {Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}}}

	tests := []struct {
		name     string
		retiring handoff.Set
		others   []handoff.Set
		opts     handoff.PruneOptions
		want     []handoff.Item
	}{{
		name:     "shared resources are kept with the successor that lists them, the obsolete one is deleted",
		retiring: oldStatic,
		others:   []handoff.Set{oldDeploy, newStatic, newDeploy},
		opts:     prOptions,
		want: []handoff.Item{
			prKeep(prCM("config-defaults"), newStatic),
			prDelete(prCM("config-v1-only")),
			prKeep(prHook, newStatic),
			prKeep(prRole, newStatic),
		},
	}, {
		name:     "component removal: no other set, everything not protected is deleted",
		retiring: prSet("static-v1", "v1", "static", 1, prNSRef, prCM("config-defaults"), prHook, prCRD, prPVC),
		opts:     prOptions,
		want: []handoff.Item{
			prProtected(prNSRef),
			prDelete(prCM("config-defaults")),
			prDelete(prHook),
			prProtected(prCRD),
			prProtected(prPVC),
		},
	}, {
		name:     "sibling of the same generation lists the same Deployment and Service: kept with the sibling",
		retiring: oldDeploy,
		others:   []handoff.Set{oldStatic, oldSTS},
		opts:     prOptions,
		want:     []handoff.Item{prKeep(prDeploy, oldSTS), prKeep(prSvc, oldSTS)},
	}, {
		name:     "a deleting successor does not protect",
		retiring: oldDeploy,
		others:   []handoff.Set{prDeleting(oldSTS), oldStatic},
		opts:     prOptions,
		want:     []handoff.Item{prDelete(prDeploy), prDelete(prSvc)},
	}, {
		name:     "of a deleting and a live lister, the live one keeps it",
		retiring: oldDeploy,
		others:   []handoff.Set{prDeleting(newDeploy), oldSTS},
		opts:     prOptions,
		want:     []handoff.Item{prKeep(prDeploy, oldSTS), prKeep(prSvc, oldSTS)},
	}, {
		name:     "the successor that is not superseded wins over an older superseded sibling",
		retiring: oldDeploy,
		others:   []handoff.Set{prSuperseded(oldSTS), newDeploy},
		opts:     prOptions,
		want:     []handoff.Item{prKeep(prDeploy, newDeploy), prKeep(prSvc, oldSTS)},
	}, {
		name:     "of two live listers the newest is the successor",
		retiring: oldDeploy,
		others:   []handoff.Set{prSet("a-old", "v2", "deployment", 5, prDeploy), prSet("z-new", "v2", "statefulset", 6, prDeploy)},
		opts:     prOptions,
		want: []handoff.Item{
			prKeep(prDeploy, prSet("z-new", "v2", "statefulset", 6)),
			prDelete(prSvc),
		},
	}, {
		name:     "the retiring set listed among the others does not protect itself",
		retiring: oldDeploy,
		others:   []handoff.Set{oldDeploy},
		opts:     prOptions,
		want:     []handoff.Item{prDelete(prDeploy), prDelete(prSvc)},
	}, {
		name:     "a protected kind listed by a successor is still kept, not skipped",
		retiring: prSet("static-v1", "v1", "static", 1, prNSRef, prCRD),
		others:   []handoff.Set{prSet("static-v2", "v2", "static", 10, prCRD, prNSRef)},
		opts:     prOptions,
		want: []handoff.Item{
			prKeep(prNSRef, prSet("static-v2", "v2", "static", 10)),
			prKeep(prCRD, prSet("static-v2", "v2", "static", 10)),
		},
	}, {
		name:     "custom protected kinds replace the default list",
		retiring: prSet("static-v1", "v1", "static", 1, prSecret, prRole, prNSRef, prCRD),
		opts:     custom,
		want: []handoff.Item{
			prProtected(prSecret),
			prProtected(prRole),
			prDelete(prNSRef),
			prDelete(prCRD),
		},
	}, {
		name:     "zero options protect nothing",
		retiring: prSet("static-v1", "v1", "static", 1, prNSRef, prPVC, prCRD),
		want:     []handoff.Item{prDelete(prNSRef), prDelete(prPVC), prDelete(prCRD)},
	}, {
		name:     "protection matches the group too: a Namespace kind of another group is not protected",
		retiring: prSet("static-v1", "v1", "static", 1, handoff.Ref{Group: "example.com", Kind: "Namespace", Name: "x"}),
		opts:     prOptions,
		want:     []handoff.Item{prDelete(handoff.Ref{Group: "example.com", Kind: "Namespace", Name: "x"})},
	}, {
		name:     "same name in another namespace or kind is another resource",
		retiring: prSet("static-v1", "v1", "static", 1, prCM("config-defaults")),
		others: []handoff.Set{prSet("static-v2", "v2", "static", 10,
			handoff.Ref{Kind: "ConfigMap", Namespace: "other", Name: "config-defaults"},
			handoff.Ref{Kind: "Secret", Namespace: prNS, Name: "config-defaults"},
			handoff.Ref{Group: "example.com", Kind: "ConfigMap", Namespace: prNS, Name: "config-defaults"})},
		opts: prOptions,
		want: []handoff.Item{prDelete(prCM("config-defaults"))},
	}, {
		name:     "repeated entries are decided once, in first-listed order",
		retiring: prSet("static-v1", "v1", "static", 1, prCM("b"), prCM("a"), prCM("b"), prCM("a")),
		others:   []handoff.Set{prSet("static-v2", "v2", "static", 10, prCM("a"))},
		opts:     prOptions,
		want:     []handoff.Item{prDelete(prCM("b")), prKeep(prCM("a"), prSet("static-v2", "v2", "static", 10))},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := handoff.Finalization(tc.retiring, tc.others, tc.opts)
			want := handoff.Decision{Set: tc.retiring.Name, UID: tc.retiring.UID, Items: tc.want}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Finalization (-want +got):\n%s", d)
			}
		})
	}
}

// prObserved builds a TektonInstallerSet as the API returns it.
func prObserved(name, gen, role, targetNS string, manifests ...map[string]any) *unstructured.Unstructured {
	items := make([]any, len(manifests))
	for i, m := range manifests {
		items[i] = m
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.tekton.dev/v1alpha1", "kind": "TektonInstallerSet",
		"spec": map[string]any{"manifests": items},
	}}
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetLabels(map[string]string{"operator.tekton.dev/created-by": "TektonPipeline", "operator.tekton.dev/type": "main",
		"operator.tekton.dev/release-version": gen, handoff.DefaultRoleLabel: role})
	u.SetAnnotations(map[string]string{"operator.tekton.dev/target-namespace": targetNS})
	return u
}

func prManifest(apiVersion, kind, ns, name string) map[string]any {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
}

// Identity is GroupKind+namespace+name, read from real set objects: the
// version does not count, and namespaced resources listed without a
// namespace land in the set's target namespace.
func TestPruneIdentityFromObservedSets(t *testing.T) {
	fam := handoff.Family{
		Kind:            "TektonInstallerSet",
		Selector:        map[string]string{"operator.tekton.dev/created-by": "TektonPipeline", "operator.tekton.dev/type": "main"},
		GenerationLabel: "operator.tekton.dev/release-version",
		TargetNamespace: func(u *unstructured.Unstructured) string {
			return u.GetAnnotations()["operator.tekton.dev/target-namespace"]
		},
	}
	old := prObserved("static-v1", "v1", "static", prNS,
		prManifest("autoscaling/v2beta2", "HorizontalPodAutoscaler", prNS, "webhook"),
		prManifest("policy/v1beta1", "PodDisruptionBudget", prNS, "webhook"),
		prManifest("v1", "ConfigMap", "", "config-defaults"),
		prManifest("v1", "ConfigMap", "", "config-leader-election"),
		prManifest("rbac.authorization.k8s.io/v1", "ClusterRole", "", "tekton-pipelines-controller"),
	)
	succ := prObserved("static-v2", "v2", "static", prNS,
		prManifest("autoscaling/v2", "HorizontalPodAutoscaler", prNS, "webhook"), // v2beta2 → v2: same resource
		prManifest("policy/v1", "PodDisruptionBudget", "", "webhook"),            // namespace from the target namespace
		prManifest("v1", "ConfigMap", prNS, "config-defaults"),                   // explicit namespace equals target
		prManifest("v1", "ConfigMap", "other-ns", "config-leader-election"),      // another namespace: not the same
		prManifest("rbac.authorization.k8s.io/v1", "ClusterRole", "", "tekton-pipelines-controller"),
	)
	retiring, err := fam.Observe(old)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fam.Observe(succ)
	if err != nil {
		t.Fatal(err)
	}
	hpa := handoff.Ref{Group: "autoscaling", Kind: "HorizontalPodAutoscaler", Namespace: prNS, Name: "webhook"}
	pdb := handoff.Ref{Group: "policy", Kind: "PodDisruptionBudget", Namespace: prNS, Name: "webhook"}
	want := handoff.Decision{Set: "static-v1", UID: "uid-static-v1", Items: []handoff.Item{
		prKeep(hpa, s),
		prKeep(pdb, s),
		prKeep(prCM("config-defaults"), s),
		prDelete(prCM("config-leader-election")),
		prKeep(prRole, s), // cluster-scoped: no namespace added
	}}
	if d := cmp.Diff(want, handoff.Finalization(retiring, []handoff.Set{s}, prOptions)); d != "" {
		t.Errorf("Finalization (-want +got):\n%s", d)
	}
}

func TestPruneDeterministicOverPermutedOthers(t *testing.T) {
	retiring := prSet("deployment-v1", "v1", "deployment", 1, prDeploy, prSvc, prCM("a"), prCM("b"))
	others := []handoff.Set{
		prSet("statefulset-v1", "v1", "statefulset", 2, prDeploy, prSvc),
		prSet("b-v2", "v2", "deployment", 5, prDeploy),
		prSet("a-v2", "v2", "statefulset", 5, prDeploy, prCM("a")), // same age as b-v2: first by name
		prDeleting(prSet("c-v2", "v2", "static", 9, prCM("b"))),
		prSuperseded(prSet("z-v1", "v1", "static", 8, prSvc)),
	}
	a2 := prSet("a-v2", "v2", "statefulset", 5)
	sts := prSet("statefulset-v1", "v1", "statefulset", 2)
	want := handoff.Decision{Set: "deployment-v1", UID: "uid-deployment-v1", Items: []handoff.Item{
		prKeep(prDeploy, a2),
		prKeep(prSvc, sts), // not superseded beats the newer superseded z-v1
		prKeep(prCM("a"), a2),
		prDelete(prCM("b")),
	}}
	perm := slices.Clone(others)
	// Every rotation and its reverse: ten orders of five sets.
	for i := range 2 * len(others) {
		if i == len(others) {
			slices.Reverse(perm)
		}
		if d := cmp.Diff(want, handoff.Finalization(retiring, perm, prOptions)); d != "" {
			t.Fatalf("order %d %v (-want +got):\n%s", i, perm, d)
		}
		perm = append(perm[1:], perm[0])
	}
}

func TestPruneDecisionString(t *testing.T) {
	retiring := prSet("static-v1", "v1", "static", 1, prNSRef, prCM("config-defaults"), prCM("config-v1-only"))
	succ := prSet("static-v2", "v2", "static", 2, prCM("config-defaults"))
	d := handoff.Finalization(retiring, []handoff.Set{succ}, prOptions)
	want := "finalize static-v1: 1 keep, 1 delete, 1 skip\n" +
		"  Skip Namespace tekton-pipelines: protected kind\n" +
		"  Keep ConfigMap tekton-pipelines/config-defaults: listed by static-v2 (v2/static)\n" +
		"  Delete ConfigMap tekton-pipelines/config-v1-only: listed by no other set\n"
	if d := cmp.Diff(want, d.String()); d != "" {
		t.Errorf("String (-want +got):\n%s", d)
	}
	if got, want := (handoff.Item{Ref: prHook, Verdict: handoff.Delete}).String(),
		"Delete ValidatingWebhookConfiguration.admissionregistration.k8s.io validation.webhook.pipeline.tekton.dev"; got != want {
		t.Errorf("Item.String without reason = %q, want %q", got, want)
	}
	if got, want := handoff.Finalization(prSet("empty", "v1", "static", 1), nil, prOptions).String(), "finalize empty: 0 keep, 0 delete, 0 skip\n"; got != want {
		t.Errorf("empty decision String = %q, want %q", got, want)
	}
}

func TestPruneDefaultOptions(t *testing.T) {
	want := handoff.PruneOptions{
		Protected: []schema.GroupKind{
			{Kind: "Namespace"},
			{Kind: "PersistentVolumeClaim"},
			{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
		},
		KeepAnnotation: "handoff.kube-handoff.io/on-remove",
		Unowned: []schema.GroupKind{
			{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
			{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
			{Group: "apiregistration.k8s.io", Kind: "APIService"},
		},
	}
	if d := cmp.Diff(want, handoff.DefaultPruneOptions()); d != "" {
		t.Errorf("DefaultPruneOptions (-want +got):\n%s", d)
	}
}

// prOracle is Finalizations the slow way: for each retiring set in turn,
// each distinct resource it lists or still has to prune (Set.Dropped),
// every other set of the family that lists it or still has to prune it.
func prOracle(retiring, family []handoff.Set, opts handoff.PruneOptions) []handoff.Decision {
	sets := slices.Clone(family)
	for _, r := range retiring {
		if !slices.ContainsFunc(sets, func(s handoff.Set) bool { return s.UID == r.UID }) {
			sets = append(sets, r)
		}
	}
	preferred := func(a, b *handoff.Set) bool {
		switch {
		case (a.Invalid == nil) != (b.Invalid == nil):
			return a.Invalid == nil
		case (a.SupersededBy == "") != (b.SupersededBy == ""):
			return a.SupersededBy == ""
		case !a.Created.Equal(b.Created):
			return a.Created.After(b.Created)
		case a.Name != b.Name:
			return a.Name < b.Name
		}
		return a.UID < b.UID
	}
	lists := make([]map[handoff.Ref]bool, len(sets))
	for j, s := range sets {
		lists[j] = map[handoff.Ref]bool{}
		for _, ref := range append(slices.Clone(s.Resources), s.Dropped...) {
			lists[j][ref] = true
		}
	}
	var out []handoff.Decision
	for _, r := range retiring {
		i := slices.IndexFunc(sets, func(s handoff.Set) bool { return s.UID == r.UID })
		d := handoff.Decision{Set: sets[i].Name, UID: sets[i].UID, Items: []handoff.Item{}}
		seen := map[handoff.Ref]bool{}
		for _, ref := range append(slices.Clone(sets[i].Resources), sets[i].Dropped...) {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			var succ *handoff.Set
			for j := range sets {
				t := &sets[j]
				if j != i && !t.Deleting && lists[j][ref] && (succ == nil || preferred(t, succ)) {
					succ = t
				}
			}
			it := handoff.Item{Ref: ref}
			switch {
			case succ != nil:
				it.Verdict, it.Successor, it.SuccessorUID, it.Reason = handoff.Keep, succ.Name, succ.UID, "listed by "+succ.String()
			case slices.Contains(opts.Protected, ref.GroupKind()):
				it.Verdict, it.Reason = handoff.Skip, "protected kind"
			default:
				it.Verdict, it.Reason = handoff.Delete, "listed by no other set"
			}
			d.Items = append(d.Items, it)
		}
		out = append(out, d)
		sets[i].Deleting = true
	}
	return out
}

// prRandomFamily draws a family of up to sets sets listing resources of a
// pool of about pool, in which names repeat across kinds and namespaces,
// and the sets to retire: some of the family in any order, and sometimes
// one outside it.
func prRandomFamily(rng *rand.Rand, sets, pool int) (retiring, family []handoff.Set) {
	kinds := []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "Namespace"}, {Group: "apps", Kind: "Deployment"},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, {Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}}
	ref := func() handoff.Ref {
		gk := kinds[rng.IntN(len(kinds))]
		return handoff.Ref{Group: gk.Group, Kind: gk.Kind, Namespace: []string{"", "a", "b"}[rng.IntN(3)],
			Name: fmt.Sprintf("r%d", rng.IntN(pool/4+1))}
	}
	n := 1 + rng.IntN(sets)
	for i := range n {
		s := handoff.Set{
			Name:         fmt.Sprintf("s%d", rng.IntN(n)), // names repeat: the UID tells sets apart
			UID:          types.UID(fmt.Sprintf("uid-%d", i)),
			Generation:   []string{"v1", "v2"}[rng.IntN(2)],
			Role:         "r",
			Created:      time.Unix(int64(rng.IntN(4)), 0),
			Deleting:     rng.IntN(5) == 0,
			SupersededBy: []string{"", "v2"}[rng.IntN(2)],
		}
		if rng.IntN(6) == 0 {
			s.Invalid = errors.New("unreadable")
		}
		for range rng.IntN(pool + 1) {
			s.Resources = append(s.Resources, ref())
		}
		if rng.IntN(3) == 0 {
			for range rng.IntN(pool/2 + 1) {
				s.Dropped = append(s.Dropped, ref())
			}
		}
		family = append(family, s)
	}
	for _, i := range rng.Perm(n)[:rng.IntN(n+1)] {
		retiring = append(retiring, family[i])
	}
	if rng.IntN(4) == 0 {
		retiring = append(retiring, handoff.Set{Name: "outside", UID: "uid-outside", Resources: []handoff.Ref{ref(), ref()}})
	}
	return retiring, family
}

// Finalizations agrees with the oracle on random families: small ones,
// ones of thousands of resources, and ones of more than 64 sets, whose
// listers take more than one word.
func TestPruneFinalizationsAgainstOracle(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 15))
		sets, pool := 6, 12
		switch seed % 10 {
		case 8:
			sets, pool = 8, 4000
		case 9:
			sets, pool = 80, 60
		}
		retiring, family := prRandomFamily(rng, sets, pool)
		want := prOracle(retiring, family, prOptions)
		got := handoff.Finalizations(retiring, family, prOptions)
		if !slices.EqualFunc(want, got, prSameDecision) {
			t.Fatalf("seed %d: Finalizations (-oracle +got):\n%s", seed, cmp.Diff(want, got, cmpopts.EquateEmpty()))
		}
		if len(retiring) > 0 {
			want := prOracle(retiring[:1], family, prOptions)[0]
			if got := handoff.Finalization(retiring[0], family, prOptions); !prSameDecision(want, got) {
				t.Fatalf("seed %d: Finalization (-oracle +got):\n%s", seed, cmp.Diff(want, got, cmpopts.EquateEmpty()))
			}
		}
	}
}

func prSameDecision(a, b handoff.Decision) bool {
	return a.Set == b.Set && a.UID == b.UID && slices.Equal(a.Items, b.Items)
}

// A set named twice among the retiring ones is decided in full both times:
// the index once made both decisions empty, so nothing it listed was kept
// or deleted.
func TestPruneFinalizationsRetiringTwice(t *testing.T) {
	old := prSet("static-v1", "v1", "static", 1, prCM("shared"), prCM("obsolete"))
	succ := prSet("static-v2", "v2", "static", 2, prCM("shared"))
	want := handoff.Decision{Set: old.Name, UID: old.UID, Items: []handoff.Item{prKeep(prCM("shared"), succ), prDelete(prCM("obsolete"))}}
	got := handoff.Finalizations([]handoff.Set{old, old}, []handoff.Set{old, succ}, prOptions)
	if d := cmp.Diff([]handoff.Decision{want, want}, got); d != "" {
		t.Errorf("Finalizations (-want +got):\n%s", d)
	}
}

// What an update in place dropped from a set and the set has not pruned
// yet (it is not Ready for the spec that dropped it) is the set's still:
// its finalization decides on it, as a set retired before its prune would
// otherwise leave it behind for good; and another set's finalization keeps
// it, as the set that dropped it prunes it only once Ready.
func TestPruneFinalizationOfDropped(t *testing.T) {
	// static-v1 dropped "moved" (its namespace moved), then v2 came.
	retiring := prSet("static-v1", "v1", "static", 1, prCM("shared"))
	retiring.Dropped = []handoff.Ref{prCM("moved"), prCM("shared")}
	succ := prSet("static-v2", "v2", "static", 2, prCM("shared"))
	want := handoff.Decision{Set: retiring.Name, UID: retiring.UID, Items: []handoff.Item{prKeep(prCM("shared"), succ), prDelete(prCM("moved"))}}
	if d := cmp.Diff(want, handoff.Finalization(retiring, []handoff.Set{succ}, prOptions)); d != "" {
		t.Errorf("Finalization of a set with dropped resources (-want +got):\n%s", d)
	}

	// static-v2 dropped "moved" by an update in place and is not Ready
	// yet; static-v1, which lists it, goes meanwhile.
	old := prSet("static-v1", "v1", "static", 1, prCM("moved"), prCM("obsolete"))
	updating := prSet("static-v2", "v2", "static", 2)
	updating.Dropped = []handoff.Ref{prCM("moved")}
	want = handoff.Decision{Set: old.Name, UID: old.UID, Items: []handoff.Item{prKeep(prCM("moved"), updating), prDelete(prCM("obsolete"))}}
	if d := cmp.Diff(want, handoff.Finalization(old, []handoff.Set{updating}, prOptions)); d != "" {
		t.Errorf("Finalization beside a set that dropped a resource (-want +got):\n%s", d)
	}
}
