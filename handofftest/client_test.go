package handofftest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

var _ dynamic.Interface = NewCluster().Dynamic()

// increment adds one to data.count of the shared config map, retrying on
// every error, as a careful controller would.
func increment(ctx context.Context, ri dynamic.ResourceInterface) {
	for {
		u, err := ri.Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(u.Object["data"].(map[string]any)["count"].(string))
		u.Object["data"] = map[string]any{"count": strconv.Itoa(n + 1)}
		if _, err := ri.Update(ctx, u, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
}

// churn creates, patches and deletes an object of its own, ignoring
// faults: a retry after a lost response may find the work already done.
func churn(ctx context.Context, ri dynamic.ResourceInterface, name string) {
	for {
		_, err := ri.Create(ctx, configMap("ns", name), metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			break
		}
	}
	for {
		_, err := ri.Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"k":"patched"}}`), metav1.PatchOptions{})
		if err == nil {
			break
		}
	}
	for {
		err := ri.Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			break
		}
	}
}

func TestConcurrency(t *testing.T) {
	c := newCluster(t)
	shared := configMap("ns", "shared")
	shared.Object["data"] = map[string]any{"count": "0"}
	if err := c.Add(shared); err != nil {
		t.Fatal(err)
	}
	c.InjectFaults(RandomFaults(3, 0.2))
	const workers, rounds = 4, 25
	var wg sync.WaitGroup
	for w := range workers {
		actor := fmt.Sprintf("w%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ri := c.ClientFor(actor).Resource(cmGVR).Namespace("ns")
			for r := range rounds {
				increment(context.Background(), ri)
				churn(context.Background(), ri, fmt.Sprintf("%s-%d", actor, r))
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // the accessors are safe while the workers run
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = c.Writes()
				_ = c.Timeline(cmKey("shared"))
				_ = c.Calls()
				_ = c.Objects()
				c.CollectGarbage()
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()

	// Every effective update of the shared map added exactly one, lost
	// responses included, because each update carried a resourceVersion.
	updates := 0
	prevRV := 0
	for _, w := range c.Writes() {
		rv, _ := strconv.Atoi(w.ResourceVersion)
		if rv <= prevRV {
			t.Fatalf("write %s: resourceVersion does not increase", w)
		}
		prevRV = rv
		if w.Key == cmKey("shared") && w.Effect == Updated {
			updates++
		}
	}
	got, _ := c.Get(cmKey("shared"))
	if count := got.Object["data"].(map[string]any)["count"]; count != strconv.Itoa(updates) {
		t.Errorf("count = %v, want %d (the number of updates)", count, updates)
	}
	if updates < workers*rounds {
		t.Errorf("%d updates, want at least %d", updates, workers*rounds)
	}
	if objs := c.Objects(); len(objs) != 1 {
		t.Errorf("%d objects left, want only the shared map", len(objs))
	}
	for w := range workers {
		key := cmKey(fmt.Sprintf("w%d-0", w))
		if tl := c.Timeline(key); len(tl) != 1 || tl[0].To.IsZero() {
			t.Errorf("timeline of %s = %v, want one closed interval", key, tl)
		}
	}
	total := 0
	for _, n := range c.Calls() {
		total += n
	}
	if total != len(c.Actions()) {
		t.Errorf("%d calls counted, %d actions recorded", total, len(c.Actions()))
	}
}

func TestCanceledContext(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Dynamic().Resource(cmGVR).Namespace("ns").Create(ctx, configMap("ns", "a"), metav1.CreateOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if len(c.Actions()) != 0 || c.Exists(cmKey("a")) {
		t.Error("a call with a canceled context reached the cluster")
	}
}

func TestResultsAreCopies(t *testing.T) {
	c := newCluster(t)
	ri := c.Dynamic().Resource(cmGVR).Namespace("ns")
	in := configMap("ns", "a")
	out := create(t, ri, in)
	in.Object["data"] = map[string]any{"k": "changed-in"}
	out.Object["data"] = map[string]any{"k": "changed-out"}
	got, err := ri.Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "data", "k"); v != "v" {
		t.Errorf("data.k = %q: the stored object shares memory with the caller", v)
	}
}
