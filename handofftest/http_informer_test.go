package handofftest

import (
	"context"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// eventually waits until cond holds, failing the test with what last
// returned if it does not within bound.
func eventually(t *testing.T, what string, cond func() (bool, any)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %v; last %v", what, bound, last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// informerFixture stores an installer set that owns config map "owned",
// and config map "free".
func informerFixture(t *testing.T, c *Cluster) {
	t.Helper()
	set := create(t, c.ClientFor("seed").Resource(setGVR), installerSet("owner"))
	create(t, c.ClientFor("seed").Resource(cmGVR).Namespace("ns"), ownedBy(configMap("ns", "owned"), set))
	create(t, c.ClientFor("seed").Resource(cmGVR).Namespace("ns"), configMap("ns", "free"))
}

// informerWrites changes what informerFixture stored through the
// in-process client: creates "new", updates "free", deletes the set, which
// the garbage collector follows by deleting "owned".
func informerWrites(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	ri := c.ClientFor("x").Resource(cmGVR).Namespace("ns")
	create(t, ri, configMap("ns", "new"))
	if _, err := ri.Patch(ctx, "free", types.MergePatchType, []byte(`{"data":{"k":"changed"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.ClientFor("x").Resource(setGVR).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// wantAfterWrites is what an informer holds after informerWrites: name to
// data.k.
var wantAfterWrites = map[string]string{"free": "changed", "new": "v"}

func TestServeDynamicInformer(t *testing.T) {
	c := newCluster(t)
	informerFixture(t, c)
	s := startServer(t, c, "informer")
	factory := dynamicinformer.NewDynamicSharedInformerFactory(httpDynamic(t, s), 0)
	cms := factory.ForResource(cmGVR)
	sets := factory.ForResource(setGVR)
	stop := make(chan struct{})
	defer factory.Shutdown()
	defer close(stop)
	factory.Start(stop)
	for gvr, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("%s did not sync", gvr)
		}
	}
	state := func() (map[string]string, int) {
		objs, err := cms.Lister().List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, o := range objs {
			u := o.(*unstructured.Unstructured)
			got[u.GetName()], _, _ = unstructured.NestedString(u.Object, "data", "k")
		}
		setObjs, _ := sets.Lister().List(labels.Everything())
		return got, len(setObjs)
	}
	if got, n := state(); len(got) != 2 || n != 1 {
		t.Fatalf("synced: config maps %v, %d sets", got, n)
	}
	informerWrites(t, c)
	eventually(t, "the informers follow creates, updates, deletes and garbage collection", func() (bool, any) {
		got, n := state()
		return cmp.Equal(wantAfterWrites, got) && n == 0, got
	})
	// Each informer watches: after a list, or (client-go v0.35 on) with
	// sendInitialEvents in place of it.
	if c.Calls()[CallKey{Actor: "informer", Verb: "watch"}] < 2 {
		t.Errorf("the informers' calls are not recorded: %v", c.Calls())
	}
}

func TestServeTypedInformer(t *testing.T) {
	c := newCluster(t)
	informerFixture(t, c)
	cs, err := kubernetes.NewForConfig(startServer(t, c, "informer").Config())
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Core().V1().ConfigMaps()
	var seen []string
	done := make(chan struct{})
	events := make(chan string, 100)
	go func() {
		defer close(done)
		for e := range events {
			seen = append(seen, e)
		}
	}()
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + obj.(*corev1.ConfigMap).Name },
		UpdateFunc: func(_, obj any) { events <- "update " + obj.(*corev1.ConfigMap).Name },
		DeleteFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				events <- "delete " + cm.Name
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	informerWrites(t, c)
	eventually(t, "the typed lister follows the writes", func() (bool, any) {
		cms, err := informer.Lister().ConfigMaps("ns").List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, cm := range cms {
			got[cm.Name] = cm.Data["k"]
		}
		return cmp.Equal(wantAfterWrites, got), got
	})
	close(stop)
	factory.Shutdown()
	close(events)
	<-done
	sort.Strings(seen)
	want := []string{"add free", "add new", "add owned", "delete owned", "update free"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("handler events (-want +got):\n%s", diff)
	}
}

func TestServeCloseRepeatedly(t *testing.T) {
	c := newCluster(t)
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		s := c.Serve("repeat")
		w, err := httpDynamic(t, s).Resource(cmGVR).Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		ended(t, w)
		if _, err := httpDynamic(t, s).Resource(cmGVR).List(context.Background(), metav1.ListOptions{}); err == nil {
			t.Fatalf("round %d: a list after Close succeeded", i)
		}
	}
	noWatchers(t, c)
	eventually(t, "no goroutine is left over", func() (bool, any) {
		n := runtime.NumGoroutine()
		return n <= before+2, n
	})
}
