//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-handoff/handoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// dyingClient returns a client whose k-th write reaches the API server but
// whose caller never learns the outcome: kill is called and the write
// returns context.Canceled, as if the process died right after sending it.
// writes counts the writes sent.
func dyingClient(t *testing.T, k int32, kill func()) (dyn dynamic.Interface, writes *atomic.Int32) {
	t.Helper()
	writes = new(atomic.Int32)
	cfg := cp.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet || writes.Add(1) != k {
				return rt.RoundTrip(req)
			}
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			kill()
			return nil, context.Canceled
		})
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn, writes
}

// Scenario 4: a reconciler killed after each write of an upgrade, in turn,
// and a new one started in its place. Upgrade k (generation g<k-1> to g<k>)
// kills its first executor right after its k-th write; a fresh executor
// then finishes. The set controller runs throughout.
func TestInterruptedUpgrade(t *testing.T) {
	ctx := context.Background()
	mon := monitorFor(t)
	e := newEnv(t, "crash", "")
	stop := e.runController(ctx)
	defer stop()
	e.drive(ctx, e.exec, e.desire("g0"), nil)
	began := time.Now()

	prev := "g0"
	for k := int32(1); ; k++ {
		if k > 20 {
			t.Fatal("an upgrade took more than 20 writes")
		}
		gen := fmt.Sprintf("g%d", k)
		d := e.desire(gen)
		from := time.Now()
		doomed, kill := context.WithCancel(ctx)
		dyn, writes := dyingClient(t, k, kill)
		e.drive(doomed, e.executor(dyn), d, nil)
		died := doomed.Err() != nil
		kill()
		e.drive(ctx, e.executor(e.dyn), d, nil)
		e.checkEnd(ctx, prev, gen)
		for _, err := range mon.gating(e.fam, d, from, time.Now()) {
			t.Error(err)
		}
		if !died {
			t.Logf("killed after each of the %d writes of an upgrade in turn; the upgrade to %s made %d writes and was not killed", k-1, gen, writes.Load())
			break
		}
		prev = gen
	}

	for id, uids := range mon.setUIDs(e.fam, began) {
		if len(uids) != 1 {
			t.Errorf("I2: %d sets were created for %s: %v", len(uids), id, uids)
		}
	}
	_, keys := e.shared("g0", "g1")
	if deleted, longest := mon.stats(keys, began); len(deleted) != 0 {
		t.Errorf("I1: shared resources deleted (longest absence %v): %v", longest, deleted)
	}
}

// Scenario 5: a desired generation that never gets Ready (its Deployment
// asks for a replica no kubelet will run) keeps the old one serving:
// nothing is retired or pruned. Rolling back then returns to the old
// generation without a gap.
func TestNeverReady(t *testing.T) {
	ctx := context.Background()
	mon := monitorFor(t)
	e := newEnv(t, "never", "")
	e.converge(ctx, e.desire("v1"))
	v2 := e.desire("v2", neverAvailable)
	began := time.Now()

	var res handoff.Result
	for round := range 40 { // 10 s: the deployment controller reports in well under 1 s
		var err error
		if res, err = e.exec.Step(ctx, v2); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if r := res.Plan.Of(handoff.ActionRetire); len(r) != 0 {
			t.Fatalf("I5: round %d plans retirements while v2 is not Ready: %v", round, r)
		}
		if err := e.ctrl.Reconcile(ctx); err != nil {
			t.Logf("round %d: reconcile: %v", round, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	sets, err := e.sets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]handoff.State{}
	for _, s := range sets {
		if s.Deleting {
			t.Errorf("set %s is being deleted", s.Name)
		}
		state[s.Generation+"/"+s.Role] = s.Readiness.State
	}
	// v1's sets serve on, but carry the superseded mark: their controller
	// reports them not Ready (Superseded) until a rollback releases them.
	want := map[string]handoff.State{"v1/static": handoff.NotReady, "v1/deployment": handoff.NotReady, "v2/static": handoff.Ready, "v2/deployment": handoff.Unknown}
	for _, s := range sets {
		if s.Generation == "v1" && s.Readiness.Reason != handoff.ReasonSuperseded {
			t.Errorf("set %s is %s, want not Ready with reason %s", s.Name, s.Readiness, handoff.ReasonSuperseded)
		}
	}
	if fmt.Sprint(state) != fmt.Sprint(want) {
		t.Errorf("set readiness %v, want %v", state, want)
	}
	if !res.Requeue || len(res.Waiting) != 1 || res.Waiting[0].Set != e.fam.SetName("v2", "deployment") {
		t.Errorf("Requeue %v, Waiting %v: want a wait on the v2 deployment set", res.Requeue, res.Waiting)
	}
	if _, err := e.get(ctx, e.configMap(onlyIn("v1"))); err != nil {
		t.Errorf("v1's own ConfigMap pruned before v2 was Ready: %v", err)
	}

	e.converge(ctx, e.desire("v1"))
	e.checkEnd(ctx, "v2", "v1")
	_, keys := e.shared("v1", "v2")
	if deleted, longest := mon.stats(keys, began); len(deleted) != 0 {
		t.Errorf("I1: shared resources deleted (longest absence %v): %v", longest, deleted)
	}
}

// snapshot is the identity and version of every object of the watched kinds
// in the e2e namespaces and of every cluster-scoped one.
type snapshot map[string]*unstructured.Unstructured

func takeSnapshot(t *testing.T, ctx context.Context, dyn dynamic.Interface) snapshot {
	t.Helper()
	s := snapshot{}
	for _, k := range kinds {
		list, err := dyn.Resource(k.gvk.GroupVersion().WithResource(k.resource)).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if k.namespaced && !strings.HasPrefix(u.GetNamespace(), "e2e-") {
				continue
			}
			u.SetKind(k.gvk.Kind)
			s[keyOf(u)] = u
		}
	}
	return s
}

// unchanged reports how o changed into now, or "" if it did not: gone,
// re-created, or written. Deployments are compared by generation, because
// the deployment controller may still write their status.
func unchanged(o, now *unstructured.Unstructured) string {
	switch {
	case now == nil:
		return "deleted"
	case now.GetUID() != o.GetUID():
		return "re-created"
	case o.GetKind() == "Deployment" && now.GetGeneration() != o.GetGeneration():
		return fmt.Sprintf("spec written (generation %d → %d)", o.GetGeneration(), now.GetGeneration())
	case o.GetKind() != "Deployment" && now.GetResourceVersion() != o.GetResourceVersion():
		return fmt.Sprintf("written (resourceVersion %s → %s)", o.GetResourceVersion(), now.GetResourceVersion())
	}
	return ""
}

// Scenario 6: removing the component, from its steady state and in the
// middle of an upgrade, deletes everything its sets installed but the
// protected Namespace, and changes nothing else in the cluster: not the
// decoys beside it, not other components' sets and resources.
func TestRemoval(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		upgrade bool
	}{{"steady", false}, {"mid-upgrade", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "removal-"+tc.name, "")
			withNamespace := func(ms map[string][]*unstructured.Unstructured) {
				ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
				ns.SetName(e.ns)
				ms["static"] = append([]*unstructured.Unstructured{ns}, ms["static"]...)
			}
			e.converge(ctx, e.desire("v1", withNamespace))
			if tc.upgrade {
				v2 := e.desire("v2", withNamespace, neverAvailable)
				for range 10 {
					if _, err := e.exec.Step(ctx, v2); err != nil {
						t.Fatal(err)
					}
					if err := e.ctrl.Reconcile(ctx); err != nil {
						t.Logf("reconcile: %v", err)
					}
					time.Sleep(100 * time.Millisecond)
				}
				if sets, err := e.sets(ctx); err != nil || len(sets) != 4 {
					t.Fatalf("mid-upgrade: want v1's and v2's sets, got %d sets (%v)", len(sets), err)
				}
			}
			// Decoys: labelled like the component, beside it, and a
			// namesake in another namespace.
			other := e.ns + "-other"
			for _, d := range []*unstructured.Unstructured{e.configMap("decoy"), e.configMap("config-00")} {
				if d.GetName() == "config-00" {
					d.SetNamespace(other)
					nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
					nsObj.SetName(other)
					if _, err := e.dyn.Resource(namespaces).Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				d.SetLabels(map[string]string{"app.kubernetes.io/part-of": "e2e", versionLabel: "v1"})
				if _, err := e.dyn.Resource(configMaps).Namespace(d.GetNamespace()).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}

			installed := map[string]*unstructured.Unstructured{}
			for _, gen := range e.manifests {
				for _, ms := range gen {
					for _, m := range ms {
						installed[keyOf(m)] = m
					}
				}
			}
			sets, err := e.sets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sets {
				installed[keyOf(s.Object)] = s.Object
			}
			before := takeSnapshot(t, ctx, e.dyn)

			e.converge(ctx, nil)
			time.Sleep(2 * time.Second) // give the garbage collector time

			nsKey := "Namespace//" + e.ns
			for k, m := range installed {
				_, err := e.get(ctx, m)
				switch {
				case k == nsKey && err != nil:
					t.Errorf("protected %s: %v", k, err)
				case k != nsKey && !apierrors.IsNotFound(err):
					t.Errorf("%s: want NotFound after removal, got %v", k, err)
				}
			}
			after := takeSnapshot(t, ctx, e.dyn)
			checked := 0
			for k, o := range before {
				if _, ok := installed[k]; ok {
					continue
				}
				checked++
				if how := unchanged(o, after[k]); how != "" {
					t.Errorf("I4: %s, not the component's, was %s", k, how)
				}
			}
			if _, ok := before["ConfigMap/"+other+"/config-00"]; !ok || checked < 10 {
				t.Errorf("the snapshot missed the decoys (%d objects checked)", checked)
			}
			t.Logf("removal %s: %d resources and sets installed, all gone but the Namespace; %d other objects unchanged", tc.name, len(installed), checked)
		})
	}
}
