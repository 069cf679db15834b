package handofftest

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The metadata client serves the objects the dynamic clients serve, cut to
// their metadata, and its calls are the cluster's calls like any other.
func TestMetadataClientReadsTheSameObjects(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	cms := c.ClientFor("installer").Resource(cmGVR).Namespace("ns")
	a := create(t, cms, configMap("ns", "a"))
	create(t, cms, configMap("ns", "b"))
	create(t, c.Dynamic().Resource(cmGVR).Namespace("other"), configMap("other", "c"))
	c.ClearActions()

	md := c.MetadataFor("executor").Resource(cmGVR)
	list, err := md.Namespace("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if list.Kind != "PartialObjectMetadataList" || list.APIVersion != "meta.k8s.io/v1" {
		t.Errorf("list is %s %s, want meta.k8s.io/v1 PartialObjectMetadataList", list.APIVersion, list.Kind)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Name)
		if it.Kind != "PartialObjectMetadata" || it.Namespace != "ns" || it.UID == "" || it.ResourceVersion == "" {
			t.Errorf("item %+v: want a PartialObjectMetadata in ns with a UID and a resourceVersion", it.ObjectMeta)
		}
	}
	if len(names) != 2 || names[0] != "a" || names[1] != "b" {
		t.Errorf("listed %v in ns, want [a b]", names)
	}
	all, err := md.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 3 {
		t.Errorf("listed %d config maps across namespaces, want 3", len(all.Items))
	}

	got, err := md.Namespace("ns").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != a.GetUID() || got.ResourceVersion != a.GetResourceVersion() {
		t.Errorf("get a: uid %s rv %s, want the created object's %s %s", got.UID, got.ResourceVersion, a.GetUID(), a.GetResourceVersion())
	}
	if _, err := md.Namespace("ns").Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get missing: %v, want NotFound", err)
	}

	acts := c.Actions()
	if len(acts) != 4 {
		t.Fatalf("%d actions recorded, want 4 (2 lists, 2 gets)", len(acts))
	}
	for _, act := range acts {
		if !act.Metadata || act.Actor != "executor" {
			t.Errorf("action %s: actor %q metadata %v, want executor's metadata call", act.GetVerb(), act.Actor, act.Metadata)
		}
	}
	calls := c.Calls()
	if calls[CallKey{Actor: "executor", Verb: "list"}] != 2 || calls[CallKey{Actor: "executor", Verb: "get"}] != 2 {
		t.Errorf("calls %v, want 2 lists and 2 gets of the executor", calls)
	}
}

// A patch through the metadata client changes the object, with the
// precondition it carries, and answers with the new metadata.
func TestMetadataClientPatches(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	cms := c.Dynamic().Resource(cmGVR).Namespace("ns")
	a := create(t, cms, configMap("ns", "a"))
	md := c.MetadataFor("executor").Resource(cmGVR).Namespace("ns")

	got, err := md.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"annotations":{"k":"v"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.GetAnnotations()["k"] != "v" || live.Object["data"] == nil {
		t.Errorf("live object %v: want the annotation added and the data kept", live.Object)
	}
	if got.Annotations["k"] != "v" || got.ResourceVersion != live.GetResourceVersion() || got.ResourceVersion == a.GetResourceVersion() {
		t.Errorf("answer %+v: want the new annotation and resourceVersion %s", got.ObjectMeta, live.GetResourceVersion())
	}

	stale := `{"metadata":{"resourceVersion":"` + a.GetResourceVersion() + `","annotations":{"k":"w"}}}`
	if _, err := md.Patch(ctx, "a", types.MergePatchType, []byte(stale), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("patch at the old resourceVersion: %v, want Conflict", err)
	}
	if err := md.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after the metadata client's delete: %v, want NotFound", err)
	}
}

// Faults see whether a call is a metadata client's, so a test can fail
// those alone.
func TestMetadataClientFaults(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	create(t, c.Dynamic().Resource(cmGVR).Namespace("ns"), configMap("ns", "a"))
	boom := errors.New("metadata refused")
	c.InjectFaults(func(call Call) Fault {
		if call.Metadata {
			return Fault{Err: boom}
		}
		return Fault{}
	}, "executor")
	if _, err := c.MetadataFor("executor").Resource(cmGVR).Namespace("ns").List(ctx, metav1.ListOptions{}); !errors.Is(err, boom) {
		t.Errorf("metadata list: %v, want the injected error", err)
	}
	if _, err := c.ClientFor("executor").Resource(cmGVR).Namespace("ns").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("dynamic list of the same actor: %v, want it through", err)
	}
	acts := c.Actions()
	last := acts[len(acts)-2]
	if !last.Metadata || !last.Injected {
		t.Errorf("the metadata list's action: metadata %v injected %v, want both", last.Metadata, last.Injected)
	}
}

// MetadataOver answers through any dynamic client as that client's own
// calls: over ClientFor, they are not marked as a metadata client's.
func TestMetadataOverADynamicClient(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	a := create(t, c.Dynamic().Resource(cmGVR).Namespace("ns"), configMap("ns", "a"))
	c.ClearActions()
	got, err := MetadataOver(c.ClientFor("wrapped")).Resource(cmGVR).Namespace("ns").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != "PartialObjectMetadata" || got.UID != a.GetUID() {
		t.Errorf("answer %s %s, want the PartialObjectMetadata of uid %s", got.Kind, got.UID, a.GetUID())
	}
	acts := c.Actions()
	if len(acts) != 1 || acts[0].Actor != "wrapped" || acts[0].Metadata {
		t.Errorf("actions %+v, want one get of actor wrapped, not marked metadata", acts)
	}
}
