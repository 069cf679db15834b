package handofftest_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/handofftest/tektonfixture"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// readiness returns the readiness of every set of the world's family.
func readiness(t *testing.T, w *handofftest.World) map[string]handoff.State {
	t.Helper()
	got := map[string]handoff.State{}
	for _, o := range w.Cluster.Objects() {
		if o.GetKind() != "TektonInstallerSet" {
			continue
		}
		s, err := w.Family.Observe(o)
		if err != nil {
			t.Fatal(err)
		}
		got[s.Role] = s.Readiness.State
	}
	return got
}

func TestSetControllerReadyWhen(t *testing.T) {
	ctx := context.Background()
	errProbe := errors.New("probe failed")
	for name, tc := range map[string]struct {
		ready   func(*unstructured.Unstructured) (bool, error)
		want    handoff.State
		wantErr error
	}{
		"true marks the set Ready":            {ready: func(*unstructured.Unstructured) (bool, error) { return true, nil }, want: handoff.Ready},
		"false leaves it without Ready":       {ready: func(*unstructured.Unstructured) (bool, error) { return false, nil }, want: handoff.Unknown},
		"an error is returned, set not Ready": {ready: func(*unstructured.Unstructured) (bool, error) { return true, errProbe }, want: handoff.Unknown, wantErr: errProbe},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			w.Controller.ReadyAfter = 1
			calls := 0
			w.Controller.ReadyWhen = func(_ context.Context, s *unstructured.Unstructured) (bool, error) {
				calls++
				return tc.ready(s)
			}
			d := w.Desire("v1", []string{"static"}, tektonfixture.Pipelines("tekton-pipelines", "v1"))
			if _, err := w.Executor.Step(ctx, d); err != nil {
				t.Fatal(err)
			}
			err := w.Controller.Reconcile(ctx)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Reconcile: got %v, want %v", err, tc.wantErr)
			}
			if calls != 1 {
				t.Errorf("ReadyWhen called %d times, want 1", calls)
			}
			if got := readiness(t, w)["static"]; got != tc.want {
				t.Errorf("static set readiness %s, want %s", got, tc.want)
			}
		})
	}
}

// Labels and annotations other controllers add to an installed resource
// (the deployment controller's revision annotation) survive the set
// controller's apply, which then has nothing to write.
func TestSetControllerKeepsForeignMetadata(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	d := w.Desire("v1", []string{"static"}, tektonfixture.Pipelines("tekton-pipelines", "v1"))
	if _, err := w.Converge(ctx, d, 20); err != nil {
		t.Fatal(err)
	}
	key := handofftest.Key{Kind: "ConfigMap", Namespace: "tekton-pipelines", Name: "config-00"}
	cms := w.Cluster.ClientFor("other").Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(key.Namespace)
	patch := `{"metadata":{"labels":{"other":"x"},"annotations":{"other.example.com/revision":"7"}}}`
	if _, err := cms.Patch(ctx, key.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	n := len(w.Cluster.Writes())
	if err := w.Controller.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, wr := range w.Cluster.Writes()[n:] {
		if wr.Key == key {
			t.Errorf("the controller wrote %s again: %v", key, wr)
		}
	}
	o, _ := w.Cluster.Get(key)
	if o.GetLabels()["other"] != "x" || o.GetAnnotations()["other.example.com/revision"] != "7" {
		t.Errorf("foreign metadata lost: labels %v, annotations %v", o.GetLabels(), o.GetAnnotations())
	}
	if o.GetLabels()["app.kubernetes.io/version"] != "v1" {
		t.Errorf("the manifest's labels lost: %v", o.GetLabels())
	}
}

// A set controller working from a list of the family read before the
// upgrade began (a lagging informer cache) still sees the old sets as not
// superseded; it must not write the old release back over what the new
// generation wrote. Guard.MayWrite tells who wrote an object by its
// controller ownerReference, and where there is none (CRDs, Namespaces,
// webhook configurations, APIServices) by the writer mark the controller
// stamps on everything it applies, so this holds for every kind.
func TestSetControllerStaleListDoesNotRevert(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("TektonPipeline")
	roles := []string{"static", "deployment"}
	v1 := w.Desire("v1", roles, tektonfixture.Pipelines("tekton-pipelines", "v1"))
	if _, err := w.Converge(ctx, v1, 30); err != nil {
		t.Fatal(err)
	}
	sets := w.Cluster.Dynamic().Resource(handofftest.SetResource)
	stale, err := sets.List(ctx, metav1.ListOptions{LabelSelector: w.Family.LabelSelector().String()})
	if err != nil {
		t.Fatal(err)
	}
	v2 := w.Desire("v2", roles, tektonfixture.Pipelines("tekton-pipelines", "v2"))
	for range 3 {
		if _, err := w.Round(ctx, v2); err != nil {
			t.Fatal(err)
		}
	}
	key := handofftest.Key{Kind: "ConfigMap", Namespace: "tekton-pipelines", Name: "config-00"}
	if o, _ := w.Cluster.Get(key); o.GetLabels()["app.kubernetes.io/version"] != "v2" {
		t.Fatalf("%s not yet written by v2: the test shows nothing", key)
	}

	lagging := *w.Controller
	lagging.Client = w.Cluster.ClientFor("lagging")
	lagging.List = func(context.Context) (*unstructured.UnstructuredList, error) { return stale.DeepCopy(), nil }
	n := len(w.Cluster.Writes())
	if err := lagging.Reconcile(ctx); err != nil {
		t.Logf("lagging pass: %v", err)
	}
	v2Lists := map[handofftest.Key]bool{}
	for _, r := range v2.Roles {
		for _, ref := range r.Resources {
			v2Lists[handofftest.Key{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}] = true
		}
	}
	for _, wr := range w.Cluster.Writes()[n:] {
		if wr.Actor == "lagging" && v2Lists[wr.Key] {
			t.Errorf("the lagging controller wrote %s, which v2 already wrote", wr.Key)
		}
	}
	for k := range v2Lists {
		if o, _ := w.Cluster.Get(k); o.GetLabels()["app.kubernetes.io/version"] != "v2" {
			t.Errorf("%s reverted to %s", k, o.GetLabels()["app.kubernetes.io/version"])
		}
	}
}

// Contract 9: the controller stamps every object it applies with the mark
// of the set it applies for (Guard.Stamp, handoff.WriterAnnotation), owned
// kinds and unowned alike; the stamp is part of what it wants, so a pass over a
// cluster already as wanted writes nothing.
func TestSetControllerStampsWhatItWrites(t *testing.T) {
	ctx := context.Background()
	roles := []string{"static", "deployment"}
	for name, tt := range map[string]struct {
		gens    []string // generations converged to, in turn
		unowned func(*handofftest.World) []schema.GroupKind
	}{
		"after an install":                         {gens: []string{"v1"}},
		"after an upgrade":                         {gens: []string{"v1", "v2"}},
		"after a rollback":                         {gens: []string{"v1", "v2", "v1"}},
		"after an upgrade, with tektoncd's owners": {gens: []string{"v1", "v2"}, unowned: func(*handofftest.World) []schema.GroupKind { return tektonfixture.Unowned() }},
		"after an install, with every kind owned":  {gens: []string{"v1"}, unowned: func(*handofftest.World) []schema.GroupKind { return nil }},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			if tt.unowned != nil {
				w.Controller.Unowned = tt.unowned(w)
			}
			var d *handoff.Desired
			for _, gen := range tt.gens {
				d = w.Desire(gen, roles, tektonfixture.Pipelines("tekton-pipelines", gen))
				if _, err := w.Converge(ctx, d, 40); err != nil {
					t.Fatalf("converge %s: %v", gen, err)
				}
			}
			want := map[handofftest.Key]string{}
			got := map[handofftest.Key]string{}
			for _, r := range d.Roles {
				o, ok := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet", Name: w.Family.SetName(d.Generation, r.Name)})
				if !ok {
					t.Fatalf("no set of %s/%s", d.Generation, r.Name)
				}
				set, err := w.Family.Observe(o)
				if err != nil {
					t.Fatal(err)
				}
				stamped := &unstructured.Unstructured{Object: map[string]any{}}
				handoff.NewGuard(set, nil).Stamp(stamped)
				for _, ref := range r.Resources {
					k := handofftest.Key{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
					want[k] = stamped.GetAnnotations()[handoff.WriterAnnotation]
					live, _ := w.Cluster.Get(k)
					got[k] = live.GetAnnotations()[handoff.WriterAnnotation]
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("writer mark by object (-want +got):\n%s", diff)
			}
			n := len(w.Cluster.Writes())
			if err := w.Controller.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if extra := w.Cluster.Writes()[n:]; len(extra) != 0 {
				t.Errorf("a steady pass wrote %d times: %v", len(extra), extra)
			}
		})
	}
}

// ownerOf returns the name of the set that controls an object, or "".
func ownerOf(u *unstructured.Unstructured) string {
	if ref := metav1.GetControllerOf(u); ref != nil {
		return ref.Name
	}
	return ""
}

// The controller applies namespaced resources listed without a namespace
// into the set's target namespace, telling scope from its mapper (so a
// cluster-scoped custom kind registered after the world was made stays
// cluster-scoped), and owns them as configured: NewWorld's way, or
// tektoncd/operator's, which gives APIServices an owner too. The executor
// sees the same resources, so an upgrade hands them over without a gap.
func TestSetControllerTargetNamespaceAndOwners(t *testing.T) {
	ctx := context.Background()
	const target = "target-ns"
	interceptors := schema.GroupVersionResource{Group: "triggers.tekton.dev", Version: "v1alpha1", Resource: "clusterinterceptors"}
	bindings := schema.GroupVersionResource{Group: "triggers.tekton.dev", Version: "v1beta1", Resource: "triggerbindings"}
	manifests := func(gen string) map[string][]*unstructured.Unstructured {
		l := map[string]string{"version": gen}
		o := func(apiVersion, kind, name string) *unstructured.Unstructured {
			return handofftest.Object(apiVersion, kind, "", name, l, map[string]any{"spec": map[string]any{"version": gen}})
		}
		return map[string][]*unstructured.Unstructured{
			"static": {
				o("v1", "Namespace", target),
				o("v1", "ConfigMap", "config"),
				o("v1", "ConfigMap", "only-"+gen),
				o("v1", "PersistentVolumeClaim", "data"),
				o("rbac.authorization.k8s.io/v1", "ClusterRole", "role"),
				o("triggers.tekton.dev/v1alpha1", "ClusterInterceptor", "cel"),
				o("triggers.tekton.dev/v1beta1", "TriggerBinding", "binding"),
				o("apiextensions.k8s.io/v1", "CustomResourceDefinition", "tasks.tekton.dev"),
				o("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "webhook"),
				o("apiregistration.k8s.io/v1", "APIService", "v1beta1.custom.metrics.k8s.io"),
			},
			"deployment": {o("apps/v1", "Deployment", "controller")},
		}
	}
	key := func(group, kind, ns, name string) handofftest.Key {
		return handofftest.Key{Group: group, Kind: kind, Namespace: ns, Name: name}
	}
	// want: the keys every generation installs, by whether they are owned.
	owned := []handofftest.Key{
		key("", "ConfigMap", target, "config"),
		key("", "PersistentVolumeClaim", target, "data"),
		key("rbac.authorization.k8s.io", "ClusterRole", "", "role"),
		key("triggers.tekton.dev", "ClusterInterceptor", "", "cel"),
		key("triggers.tekton.dev", "TriggerBinding", target, "binding"),
		key("apps", "Deployment", target, "controller"),
	}
	unowned := []handofftest.Key{
		key("", "Namespace", "", target),
		key("apiextensions.k8s.io", "CustomResourceDefinition", "", "tasks.tekton.dev"),
		key("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", "", "webhook"),
	}
	apiService := key("apiregistration.k8s.io", "APIService", "", "v1beta1.custom.metrics.k8s.io")
	for name, tt := range map[string]struct {
		unowned func(w *handofftest.World) []schema.GroupKind
		owned   []handofftest.Key
		free    []handofftest.Key
	}{
		"NewWorld's owners: none on APIServices": {
			unowned: func(w *handofftest.World) []schema.GroupKind { return w.Controller.Unowned },
			owned:   owned,
			free:    append(slices.Clone(unowned), apiService),
		},
		"tektoncd/operator's owners: APIServices and PVCs get one": {
			unowned: func(*handofftest.World) []schema.GroupKind { return tektonfixture.Unowned() },
			owned:   append(slices.Clone(owned), apiService),
			free:    unowned,
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			w.Cluster.Register(interceptors, "ClusterInterceptor", false)
			w.Cluster.Register(bindings, "TriggerBinding", true)
			fam := w.Family
			fam.TargetNamespace = func(*unstructured.Unstructured) string { return target }
			w.SetFamily(fam)
			w.Controller.Unowned = tt.unowned(w)

			check := func(gen string) {
				t.Helper()
				static := w.Family.SetName(gen, "static")
				got := map[handofftest.Key]string{}
				want := map[handofftest.Key]string{}
				for _, k := range tt.owned {
					want[k] = static
				}
				want[key("apps", "Deployment", target, "controller")] = w.Family.SetName(gen, "deployment")
				for _, k := range tt.free {
					want[k] = ""
				}
				want[key("", "ConfigMap", target, "only-"+gen)] = static
				for k := range want {
					o, ok := w.Cluster.Get(k)
					if !ok {
						t.Errorf("%s: %s does not exist", gen, k)
						continue
					}
					got[k] = ownerOf(o)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: controlling set by object (-want +got):\n%s", gen, diff)
				}
			}
			v1 := w.Desire("v1", []string{"static", "deployment"}, manifests("v1"))
			if _, err := w.Converge(ctx, v1, 30); err != nil {
				t.Fatal(err)
			}
			check("v1")

			start := w.Cluster.Now()
			v2 := w.Desire("v2", []string{"static", "deployment"}, manifests("v2"))
			if _, err := w.Converge(ctx, v2, 30); err != nil {
				t.Fatal(err)
			}
			check("v2")
			if err := handofftest.CheckConverged(w.Cluster, w.Family, v2); err != nil {
				t.Error(err)
			}
			if gaps := w.Cluster.Gaps(append(slices.Clone(tt.owned), tt.free...), start, w.Cluster.Now()); len(gaps) != 0 {
				t.Errorf("shared resources absent during the upgrade: %v", gaps)
			}
			if k := key("", "ConfigMap", target, "only-v1"); w.Cluster.Exists(k) {
				t.Errorf("%s, listed by v1 alone, was not pruned", k)
			}
		})
	}
}

// statusOf returns the Ready condition of a set and whether its
// observedGeneration is its generation.
func statusOf(t *testing.T, w *handofftest.World, name string) (cond map[string]any, current bool) {
	t.Helper()
	o, ok := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet", Name: name})
	if !ok {
		t.Fatalf("set %s does not exist", name)
	}
	og, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == "Ready" {
			return m, og == o.GetGeneration()
		}
	}
	return nil, og == o.GetGeneration()
}

// Contract 8: while the executor's superseded mark is on a set, its
// controller reports Ready=False (Superseded), and writes it once; after a
// rollback releases the set, the set is Ready again only once the
// controller has applied it ReadyAfter passes since the release.
func TestSetControllerSupersededIsNotReady(t *testing.T) {
	ctx := context.Background()
	for name, tt := range map[string]struct {
		readyAfter int
	}{
		"Ready after one pass since the release":     {readyAfter: 1},
		"Ready after two passes since the release":   {readyAfter: 2},
		"Ready after three passes since the release": {readyAfter: 3},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			w.Controller.ReadyAfter = tt.readyAfter
			roles := []string{"static", "deployment"}
			v1 := w.Desire("v1", roles, tektonfixture.Pipelines("tekton-pipelines", "v1"))
			v2 := w.Desire("v2", roles, tektonfixture.Pipelines("tekton-pipelines", "v2"))
			if _, err := w.Converge(ctx, v1, 30); err != nil {
				t.Fatal(err)
			}
			old := []string{w.Family.SetName("v1", "static"), w.Family.SetName("v1", "deployment")}

			// Upgrade begins: v1's sets are marked superseded.
			if _, err := w.Executor.Step(ctx, v2); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := w.Controller.Reconcile(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range old {
				cond, current := statusOf(t, w, name)
				if cond["status"] != "False" || cond["reason"] != handoff.ReasonSuperseded || !current {
					t.Errorf("superseded %s: Ready condition %v (observedGeneration current: %t), want False, %s, current", name, cond, current, handoff.ReasonSuperseded)
				}
			}
			n := len(w.Cluster.Writes())
			if err := w.Controller.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			for _, wr := range w.Cluster.Writes()[n:] {
				if slices.Contains(old, wr.Key.Name) {
					t.Errorf("a pass over a set still superseded wrote it again: %v", wr)
				}
			}

			// Rollback: the executor releases v1's sets.
			if _, err := w.Executor.Step(ctx, v1); err != nil {
				t.Fatal(err)
			}
			ready := func() bool {
				for _, name := range old {
					o, _ := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet", Name: name})
					if s, err := w.Family.Observe(o); err != nil || s.Readiness.State != handoff.Ready {
						return false
					}
				}
				return true
			}
			passes := 0
			for ; passes <= tt.readyAfter && !ready(); passes++ {
				if err := w.Controller.Reconcile(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if passes != tt.readyAfter {
				t.Errorf("released sets Ready after %d passes, want %d", passes, tt.readyAfter)
			}
		})
	}
}

// A set of the family that cannot be read whole does not stop the pass:
// its error (naming it, wrapping handoff.ErrInvalidSet) is returned, it is
// not applied, and the other sets are reconciled; being deleted, it keeps
// its finalizer, as its Finalize fails.
func TestSetControllerUnreadableSet(t *testing.T) {
	ctx := context.Background()
	const bad = "component-main-unknown-xyz"
	for name, tt := range map[string]struct {
		deleting bool
	}{
		"an unreadable set":               {},
		"an unreadable set being deleted": {deleting: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := handofftest.NewWorld("TektonPipeline")
			v1 := w.Desire("v1", []string{"static"}, tektonfixture.Pipelines("tekton-pipelines", "v1"))
			if _, err := w.Converge(ctx, v1, 30); err != nil {
				t.Fatal(err)
			}
			// No role label, and no RoleOf to derive one.
			lbls := maps.Clone(w.Family.Selector)
			lbls[w.Family.GenerationLabel] = "v1"
			set := handofftest.Object("operator.tekton.dev/v1alpha1", "TektonInstallerSet", "", bad, lbls,
				map[string]any{"spec": map[string]any{"manifests": []any{
					handofftest.Object("v1", "ConfigMap", "tekton-pipelines", "unreadable-sets-own", nil, nil).Object,
				}}})
			if tt.deleting {
				now := metav1.NewTime(w.Cluster.Now())
				set.SetDeletionTimestamp(&now)
				set.SetFinalizers([]string{w.Controller.Finalizer})
			}
			if err := w.Cluster.Add(set); err != nil {
				t.Fatal(err)
			}
			// Something the valid set lists is deleted: the pass must
			// still put it back.
			cm := handofftest.Key{Kind: "ConfigMap", Namespace: "tekton-pipelines", Name: "config-00"}
			if err := w.Cluster.ClientFor("other").Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}

			err := w.Controller.Reconcile(ctx)
			var se *handoff.SetError
			if !errors.Is(err, handoff.ErrInvalidSet) || !errors.As(err, &se) || se.Name != bad {
				t.Errorf("Reconcile: %v; want an error naming %s, wrapping ErrInvalidSet", err, bad)
			}
			if !w.Cluster.Exists(cm) {
				t.Errorf("%s, listed by the valid set, was not applied again", cm)
			}
			if w.Cluster.Exists(handofftest.Key{Kind: "ConfigMap", Namespace: "tekton-pipelines", Name: "unreadable-sets-own"}) {
				t.Error("the unreadable set was applied")
			}
			o, ok := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet", Name: bad})
			if !ok {
				t.Fatalf("the unreadable set is gone")
			}
			if want := map[bool][]string{true: {w.Controller.Finalizer}, false: nil}[tt.deleting]; !slices.Equal(o.GetFinalizers(), want) {
				t.Errorf("the unreadable set's finalizers: %v, want %v", o.GetFinalizers(), want)
			}
			if err := handofftest.CheckConverged(w.Cluster, w.Family, v1); !errors.Is(err, handoff.ErrInvalidSet) {
				t.Errorf("CheckConverged: %v; want the unreadable set reported", err)
			}
		})
	}
}
