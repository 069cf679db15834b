package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// TestRecorder checks the watch recorder on client-go's fake dynamic
// client: an absence that ends is one gap, one still open when the record
// stops is a gap up to then, other objects' events are ignored, and a key
// absent before the record starts is an error. hack/e2e.sh runs the same
// recorder against a real API server (live_e2e_test.go).
func TestRecorder(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cm := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("demo")
		u.SetName(name)
		return u
	}
	key := func(name string) handofftest.Key { return handofftest.KeyOf(cm(name)) }
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	ctx := context.Background()

	t.Run("gaps", func(t *testing.T) {
		dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), cm("back"), cm("gone"), cm("other"))
		cms := dyn.Resource(gvr).Namespace("demo")
		rec, err := record(ctx, dyn, mapper, []handofftest.Key{key("back"), key("gone")})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		for _, name := range []string{"back", "gone", "other"} {
			if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"back", "other"} {
			if _, err := cms.Create(ctx, cm(name), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Events arrive asynchronously: wait until the recorder saw them.
		waitFor(t, func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return len(rec.gaps) == 1 && len(rec.absent) == 1
		})
		gaps, err := rec.stop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(gaps) != 2 {
			t.Fatalf("gaps = %v, want one for %s and one for %s", gaps, key("back"), key("gone"))
		}
		byKey := map[handofftest.Key]handofftest.Gap{}
		for _, g := range gaps {
			byKey[g.Key] = g
			if g.From.Before(began) || g.To.Before(g.From) {
				t.Errorf("gap %s is not within the record", g)
			}
		}
		if _, ok := byKey[key("back")]; !ok {
			t.Errorf("no gap for %s, deleted and created again", key("back"))
		}
		if _, ok := byKey[key("gone")]; !ok {
			t.Errorf("no gap for %s, still absent at the end", key("gone"))
		}
	})

	t.Run("absent before the record", func(t *testing.T) {
		dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), cm("back"))
		_, err := record(ctx, dyn, mapper, []handofftest.Key{key("back"), key("gone")})
		if err == nil || !strings.Contains(err.Error(), "absent before the upgrade") {
			t.Fatalf("record = %v, want an error for %s", err, key("gone"))
		}
	})
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
