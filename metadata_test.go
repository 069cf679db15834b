package handoff_test

// Executor.Metadata: what the executor decides from metadata alone it
// reads so, and what a probe reads it still reads whole.

import (
	"context"
	"slices"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// metadataCalls counts the executor's calls of a metadata client from
// handofftest's Cluster.MetadataFor.
type metadataCalls struct{ c *handofftest.Cluster }

func (m metadataCalls) count(verb, resource string) int {
	n := 0
	for _, a := range m.c.Actions() {
		if a.Metadata && a.Actor == "executor" && a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// listed returns the executor's Lists of a resource's metadata so far.
func (m metadataCalls) listed(resource string) int { return m.count("list", resource) }

// patched returns the executor's Patches through the metadata client so far.
func (m metadataCalls) patched(resource string) int { return m.count("patch", resource) }

// An upgrade with a cache that is current and a metadata client lists no
// set whole: each confirmation before a create or a retirement is one List
// of the family's metadata, and the retirement reads what it hands over
// with metadata alone.
func TestMetadataUpgradeWithCurrentCacheListsNoSetWhole(t *testing.T) {
	ctx := context.Background()
	roles := []string{"static", "deployment"}
	w := handofftest.NewWorld("TektonPipeline")
	v1 := w.Desire("v1", roles, smallComponent("v1"))
	v2 := w.Desire("v2", roles, smallComponent("v2"))
	if _, err := w.Converge(ctx, v1, 30); err != nil {
		t.Fatal(err)
	}
	withCache(w)
	w.Executor.Metadata = w.Cluster.MetadataFor("executor")
	md := metadataCalls{w.Cluster}
	w.Cluster.ClearActions()
	if _, err := w.Converge(ctx, v2, 30); err != nil {
		t.Fatal(err)
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, v2); err != nil {
		t.Fatal(err)
	}
	lists := map[string]int{}
	for _, a := range w.Cluster.Actions() {
		if a.Actor == "executor" && a.GetVerb() == "list" {
			lists[a.GetResource().Resource]++
		}
	}
	sets := handofftest.SetResource.Resource
	// The Steps that create the static set, then the deployment set, and
	// the one that retires both: three confirmations.
	if got := md.listed(sets); got != 3 {
		t.Errorf("listed the family's metadata %d times, want 3 (the confirmations)", got)
	}
	if whole := lists[sets] - md.listed(sets); whole != 0 {
		t.Errorf("listed the sets whole %d times with a cache that is current, want 0", whole)
	}
	// The superseded marks of the two v1 sets, answered with metadata.
	if got := md.patched(sets); got != 2 {
		t.Errorf("marked %d sets through the metadata client, want 2", got)
	}
	// What the retiring sets list: the ConfigMaps and the Deployments of
	// the namespace, one List each, metadata alone.
	for _, r := range []string{"configmaps", "deployments"} {
		if got, all := md.listed(r), lists[r]; got != 1 || all != 1 {
			t.Errorf("%s: %d Lists of metadata among %d, want 1 of 1", r, got, all)
		}
	}
}

// dataProbe is a deploymentProbe that needs more than metadata: a
// Deployment is rolled out when it has data. It records what it was given
// without.
func dataProbe(bare *[]handoff.Ref) deploymentProbe {
	return deploymentProbe{check: func(_ handoff.Set, ref handoff.Ref, obj *unstructured.Unstructured) (string, string) {
		if obj.Object["data"] == nil {
			*bare = append(*bare, ref)
			return "NoData", ref.Name + " read without its content"
		}
		return "", ""
	}}
}

// What an ObjectProbe reads is read whole, also where the retirement that
// follows in the same Step reads the rest of what it lists with metadata
// alone.
func TestMetadataProbeReadsWhole(t *testing.T) {
	f := newFixture(t)
	var bare []handoff.Ref
	f.fam.Probe = dataProbe(&bare)
	f.exec.Family = f.fam
	f.exec.Metadata = f.c.MetadataFor("executor")
	md := metadataCalls{f.c}
	dep := mkObj("apps/v1", "Deployment", testNS, "controller", "")
	shared := cm("config")
	catalog := handofftest.Catalog{}
	f.exec.Build = catalog.Build
	v1 := catalog.Desire("v1", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {shared, dep}})
	v2 := catalog.Desire("v2", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {shared, dep}})
	f.seed(t, nil, []*unstructured.Unstructured{shared, dep}, nil)
	if err := f.steps(t, v1, 5, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.steps(t, v2, 6, nil); err != nil {
		t.Fatal(err)
	}
	if len(bare) > 0 {
		t.Fatalf("the probe was given %v without content", bare)
	}
	sets, err := f.exec.Dynamic.Resource(handofftest.SetResource).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 1 || sets.Items[0].GetLabels()[f.fam.GenerationLabel] != "v2" {
		t.Errorf("sets left: %d, want the v2 set alone", len(sets.Items))
	}
	if md.listed("configmaps") == 0 {
		t.Error("the retirement read the ConfigMaps whole; want their metadata alone")
	}
	if n := md.listed("deployments"); n != 0 {
		t.Errorf("listed the Deployments' metadata %d times; the probe reads them whole", n)
	}
}

// A mark answered with metadata alone keeps the content the Step read only
// while the set's generation is the one read: when something changed the
// set's content in between, the Step reads the set again.
func TestMetadataMarkOfAChangedSetReadsItAgain(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.exec.Metadata = f.c.MetadataFor("executor")
	md := metadataCalls{f.c}
	old := "comp-main-static-v1"
	f.seed(t, []setSpec{{name: old, gen: "v1", role: "static", ready: true, lists: []*unstructured.Unstructured{cm("a")}}}, []*unstructured.Unstructured{cm("a")}, nil)
	catalog := handofftest.Catalog{}
	f.exec.Build = catalog.Build
	v2 := catalog.Desire("v2", []string{"static"}, map[string][]*unstructured.Unstructured{"static": {cm("a"), cm("b")}})
	key := handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: old}
	changed := false
	f.c.InjectFaults(func(call handofftest.Call) handofftest.Fault {
		if changed || call.Verb != "patch" || call.Resource != handofftest.SetResource || call.Name != old {
			return handofftest.Fault{}
		}
		// Its controller rewrites the set's content between the Step's
		// List and its mark.
		changed = true
		live, _ := f.c.Get(key)
		live = live.DeepCopy()
		if err := unstructured.SetNestedField(live.Object, "rewritten", "spec", "note"); err != nil {
			t.Error(err)
		}
		if _, err := f.c.ClientFor("controller").Resource(handofftest.SetResource).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
		return handofftest.Fault{}
	}, "executor")
	if _, err := f.exec.Step(ctx, v2); err != nil {
		t.Fatal(err)
	}
	if !changed || md.patched(handofftest.SetResource.Resource) != 1 {
		t.Fatalf("the mark did not go through the metadata client (changed %v, patched %d)", changed, md.patched(handofftest.SetResource.Resource))
	}
	var seq []string
	for _, a := range f.c.Actions() {
		if a.Actor == "executor" && a.GetResource() == handofftest.SetResource && a.Name == old {
			seq = append(seq, a.GetVerb())
		}
	}
	if want := []string{"patch", "get"}; !slices.Equal(seq, want) {
		t.Errorf("calls on %s: %v, want %v (the mark, then the set read again)", old, seq, want)
	}
}
