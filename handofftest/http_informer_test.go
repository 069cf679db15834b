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
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamiclister"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
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

// dynamicInformer is the informer client-go's dynamic informer factory
// makes for one resource (the factory would compile every API group's
// typed informers into these tests).
func dynamicInformer(client dynamic.Interface, gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	ri := client.Resource(gvr)
	return cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (k8sruntime.Object, error) {
			return ri.List(context.Background(), o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(context.Background(), o)
		},
	}, &unstructured.Unstructured{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func TestServeDynamicInformer(t *testing.T) {
	c := newCluster(t)
	informerFixture(t, c)
	s := startServer(t, c, "informer")
	cms := dynamicInformer(httpDynamic(t, s), cmGVR)
	sets := dynamicInformer(httpDynamic(t, s), setGVR)
	stop := make(chan struct{})
	defer close(stop)
	go cms.Run(stop)
	go sets.Run(stop)
	if !cache.WaitForCacheSync(stop, cms.HasSynced, sets.HasSynced) {
		t.Fatal("the dynamic informers did not sync")
	}
	state := func() (map[string]string, int) {
		objs, err := dynamiclister.New(cms.GetIndexer(), cmGVR).List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, u := range objs {
			got[u.GetName()], _, _ = unstructured.NestedString(u.Object, "data", "k")
		}
		setObjs, _ := dynamiclister.New(sets.GetIndexer(), setGVR).List(labels.Everything())
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
	// A typed client and informer of the core group, as client-go's
	// informer factory builds them (the factory itself would compile every
	// API group into these tests).
	core, err := corev1client.NewForConfig(startServer(t, c, "informer").Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (k8sruntime.Object, error) {
			return core.ConfigMaps(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return core.ConfigMaps(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, &corev1.ConfigMap{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	lister := corelisters.NewConfigMapLister(informer.GetIndexer())
	var seen []string
	done := make(chan struct{})
	events := make(chan string, 100)
	go func() {
		defer close(done)
		for e := range events {
			seen = append(seen, e)
		}
	}()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
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
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		informer.Run(stop)
	}()
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		t.Fatal("the typed informer did not sync")
	}
	informerWrites(t, c)
	eventually(t, "the typed lister follows the writes", func() (bool, any) {
		cms, err := lister.ConfigMaps("ns").List(labels.Everything())
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
	<-ran
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
