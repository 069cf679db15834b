package handoff_test

// Executor.Cache: a steady reconcile makes no API call, and no retirement
// is ever carried out on what a lagging cache says.

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// laggingCache stands in for an informer's lister. It records the family
// as stored in the cluster before every API call (no API call of its own)
// and serves the state lag records old, or with lag 0 the state now;
// serve, if set, edits what it serves.
type laggingCache struct {
	mu      sync.Mutex
	c       *handofftest.Cluster
	fam     handoff.Family
	history [][]*unstructured.Unstructured
	lag     int
	serve   func([]*unstructured.Unstructured)
}

func (l *laggingCache) snapshot() {
	sets := l.now()
	l.mu.Lock()
	l.history = append(l.history, sets)
	l.mu.Unlock()
}

func (l *laggingCache) now() []*unstructured.Unstructured {
	var sets []*unstructured.Unstructured
	for _, o := range l.c.Objects() {
		if o.GetKind() == setKind && l.fam.Contains(o.GetLabels()) {
			sets = append(sets, o)
		}
	}
	return sets
}

func (l *laggingCache) List(selector labels.Selector) ([]*unstructured.Unstructured, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	state := l.now()
	if l.lag > 0 && len(l.history) > 0 {
		state = l.history[max(0, len(l.history)-l.lag)]
	}
	var out []*unstructured.Unstructured
	for _, o := range state {
		if selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o.DeepCopy())
		}
	}
	if l.serve != nil {
		l.serve(out)
	}
	return out, nil
}

var _ handoff.SetLister = (*laggingCache)(nil)

func TestCacheSteadyStateMakesNoAPICall(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("Comp")
	v1 := w.Desire("v1", staticDeploy, small("v1"))
	if _, err := w.Converge(ctx, v1, 50); err != nil {
		t.Fatal(err)
	}
	cache := &laggingCache{c: w.Cluster, fam: w.Family}
	cache.snapshot()
	w.Executor.Cache = cache
	w.Cluster.ClearActions()
	res, err := w.Executor.Step(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requeue || res.Confirmed {
		t.Errorf("steady Step: Requeue %v, Confirmed %v; want neither", res.Requeue, res.Confirmed)
	}
	if calls := callsOf(w.Cluster, "executor"); calls.total() != 0 {
		t.Errorf("steady Step with a cache made API calls: %v", calls)
	}
}

// The cache says the desired set is Ready; the API server says it is not.
// The plan made from the cache retires the old set; the Step confirms,
// plans again and retires nothing.
func TestCacheStaleReadyRetiresNothing(t *testing.T) {
	f := newFixture(t)
	shared := cm("shared")
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, supersededBy: "v2", lists: []*unstructured.Unstructured{shared}},
		{name: "static-v2", gen: "v2", role: "static", age: 10, lists: []*unstructured.Unstructured{shared}},
	}, []*unstructured.Unstructured{shared}, map[string]string{"shared": "static-v1"})
	cache := &laggingCache{c: f.c, fam: f.fam, serve: func(sets []*unstructured.Unstructured) {
		for _, s := range sets {
			if s.GetName() == "static-v2" {
				s.Object["status"] = map[string]any{"observedGeneration": s.GetGeneration(),
					"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
			}
		}
	}}
	cache.snapshot()
	f.exec.Cache = cache
	from := handoff.Planner{Family: f.fam}
	cached, _ := cache.List(f.fam.LabelSelector())
	items := make([]unstructured.Unstructured, len(cached))
	for i, o := range cached {
		items[i] = *o
	}
	sets, _ := f.fam.ObserveAll(items)
	if p, err := from.Plan(sets, desired("v2", "static")); err != nil || len(p.Of(handoff.ActionRetire)) != 1 {
		t.Fatalf("the cache's plan does not retire static-v1 (%v), the test shows nothing:\n%s", err, p)
	}

	res, err := f.exec.Step(context.Background(), desired("v2", "static"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Confirmed {
		t.Error("a plan that retires was not confirmed")
	}
	if got := res.Plan.Of(handoff.ActionRetire); len(got) != 0 {
		t.Errorf("confirmed plan retires %v; static-v2 is not Ready", got)
	}
	if n := callsOf(f.c, "executor")["delete"]; n != 0 {
		t.Errorf("the executor made %d delete calls", n)
	}
	if o, ok := f.c.Get(handofftest.Key{Group: "operator.tekton.dev", Kind: setKind, Name: "static-v1"}); !ok || o.GetDeletionTimestamp() != nil {
		t.Error("static-v1 was retired")
	}
}

// notReady sets the named set's Ready condition to False for its current
// generation, if the set exists.
func notReady(t *testing.T, c *handofftest.Cluster, name string) {
	t.Helper()
	sets := c.ClientFor("health").Resource(handofftest.SetResource)
	live, err := sets.Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	live.Object["status"] = map[string]any{"observedGeneration": live.GetGeneration(),
		"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "DeploymentFailed"}}}
	if _, err := sets.UpdateStatus(context.Background(), live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Upgrades and rollbacks with a cache that lags by a random number of API
// calls: at every set delete the executor makes, every desired set on the
// API server is Ready for its current spec (I5), and the upgrades converge.
func TestCacheRandomLagNeverRetiresOnStaleState(t *testing.T) {
	ctx := context.Background()
	// With a metadata client (Executor.Metadata), the confirmation is a
	// List of the family's metadata, and a cache that lags is caught by
	// the resourceVersions it holds.
	for seed := int64(1); seed <= 80; seed++ {
		withMetadata := seed > 40
		t.Run(fmt.Sprintf("seed %d metadata %v", seed, withMetadata), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			w := handofftest.NewWorld("Comp")
			gens := map[string]*handoff.Desired{}
			for _, g := range []string{"v1", "v2", "v3"} {
				gens[g] = w.Desire(g, staticDeploy, small(g))
			}
			cache := &laggingCache{c: w.Cluster, fam: w.Family}
			var (
				mu      sync.Mutex
				want    *handoff.Desired
				retires int
				bad     []string
			)
			w.Cluster.InjectFaults(func(call handofftest.Call) handofftest.Fault {
				cache.snapshot()
				if call.Actor != "executor" || call.Verb != "delete" || call.Resource != handofftest.SetResource {
					return handofftest.Fault{}
				}
				mu.Lock()
				defer mu.Unlock()
				retires++
				for _, r := range want.Roles {
					name := w.Family.SetName(want.Generation, r.Name)
					o, ok := w.Cluster.Get(handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: name})
					if !ok {
						bad = append(bad, fmt.Sprintf("delete %s while %s is missing", call.Name, name))
						continue
					}
					if rd := (handoff.ConditionProbe{}).Ready(o); rd.State != handoff.Ready || o.GetAnnotations()[handoff.DefaultSupersededAnnotation] != "" {
						bad = append(bad, fmt.Sprintf("delete %s while %s is %s", call.Name, name, rd))
					}
				}
				return handofftest.Fault{}
			})
			w.Executor.Cache = cache
			md := metadataCalls{w.Cluster}
			if withMetadata {
				w.Executor.Metadata = w.Cluster.MetadataFor("executor")
			}
			// Upgrades abandoned after a round or two, then rolled back:
			// a lagging cache then still shows the old generation Ready
			// and unmarked, as it was before the upgrade began.
			for _, step := range []struct {
				gen    string
				rounds int // 0: until converged
			}{{"v1", 0}, {"v2", 1 + rng.Intn(2)}, {"v1", 0}, {"v2", 0}, {"v3", 1 + rng.Intn(3)}, {"v2", 0}, {"v1", 0}} {
				g := step.gen
				mu.Lock()
				want = gens[g]
				mu.Unlock()
				// A plan from a lagging cache can look settled; an informer
				// catches up and reconciles again, so only a Step on an
				// up-to-date cache that finds nothing to do ends the loop.
				converged, settled := false, false
				for round := 0; round < 80 && !converged; round++ {
					cache.lag = rng.Intn(30)
					if settled {
						cache.lag = 0
					}
					if rng.Intn(3) == 0 {
						// A desired set stops being Ready (its Deployment
						// failed); its controller's next pass heals it.
						r := want.Roles[rng.Intn(len(want.Roles))]
						notReady(t, w.Cluster, w.Family.SetName(want.Generation, r.Name))
					}
					res, err := w.Round(ctx, want)
					settled = err == nil && !res.Requeue
					converged = settled && cache.lag == 0
					if step.rounds > 0 && round+1 == step.rounds {
						break
					}
				}
				if step.rounds > 0 {
					continue
				}
				if !converged {
					t.Fatalf("%s not reached in 80 rounds", g)
				}
				if err := handofftest.CheckConverged(w.Cluster, w.Family, want); err != nil {
					t.Fatalf("%s: %v", g, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if retires == 0 {
				t.Fatal("no set was retired: the test shows nothing")
			}
			if withMetadata && md.listed(handofftest.SetResource.Resource) == 0 {
				t.Fatal("no confirmation listed the family's metadata: the test shows nothing")
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}
