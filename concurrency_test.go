package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// wide is a component of one Deployment role and n static roles after it,
// each listing a ConfigMap of its own and one every role lists: an upgrade
// marks n+1 sets, creates n at once once the first is Ready, and retires
// n+1 together.
func wide(gen string, n int) (map[string][]*unstructured.Unstructured, []string) {
	ms := map[string][]*unstructured.Unstructured{"deployment": {mkObj("apps/v1", "Deployment", testNS, "controller", gen)}}
	roles := []string{"deployment"}
	for i := range n {
		role := fmt.Sprintf("static-%d", i)
		ms[role] = []*unstructured.Unstructured{
			mkObj("v1", "ConfigMap", testNS, "config-"+role, gen),
			mkObj("v1", "ConfigMap", testNS, "config-shared", gen),
		}
		roles = append(roles, role)
	}
	return ms, roles
}

// installWide returns a world with v1 of a wide component of n static
// roles installed, both generations, and the roles.
func installWide(t *testing.T, n int) (*handofftest.World, *handoff.Desired, *handoff.Desired, []string) {
	t.Helper()
	w := handofftest.NewWorld("Comp")
	m1, roles := wide("v1", n)
	m2, _ := wide("v2", n)
	v1, v2 := w.Desire("v1", roles, m1), w.Desire("v2", roles, m2)
	if _, err := w.Converge(context.Background(), v1, 50); err != nil {
		t.Fatalf("install v1: %v", err)
	}
	return w, v1, v2, roles
}

// inFlight is a SetClient that counts how many writes are under way at
// once. Each write waits a little, so writes sent together overlap.
type inFlight struct {
	handoff.SetClient
	mu        sync.Mutex
	now, most int
}

func (f *inFlight) write() func() {
	f.mu.Lock()
	f.now++
	f.most = max(f.most, f.now)
	f.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	return func() {
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	}
}

func (f *inFlight) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer f.write()()
	return f.SetClient.Create(ctx, obj, opts, sub...)
}

func (f *inFlight) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer f.write()()
	return f.SetClient.Patch(ctx, name, pt, data, opts, sub...)
}

func (f *inFlight) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	defer f.write()()
	return f.SetClient.Delete(ctx, name, opts, sub...)
}

// upgradeWide installs v1 of a wide component of n static roles, upgrades
// it to v2 with the executor's Concurrency set to conc, and returns the
// world, both generations, the writes of each Step of the upgrade and the
// most set writes that were under way at once.
func upgradeWide(t *testing.T, n, conc int) (w *handofftest.World, v1, v2 *handoff.Desired, start time.Time, steps [][]handoff.Call, most int) {
	t.Helper()
	ctx := context.Background()
	w, v1, v2, _ = installWide(t, n)
	w.Cluster.ClearActions()
	start = w.Cluster.Now()
	sets := &inFlight{SetClient: w.Executor.Dynamic.Resource(w.Family.Resource)}
	w.Executor.Sets, w.Executor.Concurrency = sets, conc
	var gate handofftest.Gate
	for round := 0; ; round++ {
		if round == 50 {
			t.Fatalf("Concurrency %d: not converged to v2 after 50 rounds", conc)
		}
		if err := gate.Observe(w.Cluster, w.Family, *v2); err != nil {
			t.Fatalf("Concurrency %d: I5: %v", conc, err)
		}
		res, err := w.Round(ctx, v2)
		if len(res.Writes) > 0 {
			steps = append(steps, res.Writes)
		}
		if err == nil && !res.Requeue {
			break
		}
	}
	return w, v1, v2, start, steps, sets.most
}

// With Concurrency above 1, an upgrade makes the same writes, Step by
// Step and in the same order in its Result, as one write at a time, and
// ends in the same state; only the set writes of a kind overlap.
func TestConcurrencySameWritesAsOneAtATime(t *testing.T) {
	const n = 6
	w1, v1, v2, start1, one, most1 := upgradeWide(t, n, 1)
	checkUpgrade(t, w1, v1, v2, start1, "one at a time")
	w4, v1, v2, start4, four, most4 := upgradeWide(t, n, 4)
	checkUpgrade(t, w4, v1, v2, start4, "Concurrency 4")
	if most1 != 1 {
		t.Errorf("one at a time: %d set writes under way at once, want 1", most1)
	}
	// n+1 marks, n creates, n+1 deletes go out in runs: 4 at a time.
	if most4 != 4 {
		t.Errorf("Concurrency 4: at most %d set writes under way at once, want 4", most4)
	}
	if diff := cmp.Diff(one, four); diff != "" {
		t.Errorf("writes by Step (-one at a time +Concurrency 4):\n%s", diff)
	}
	verbs := map[string]int{}
	for _, step := range four {
		for _, c := range step {
			verbs[c.Verb]++
		}
	}
	if want := map[string]int{"create": n + 1, "patch": n + 1, "delete": n + 1}; !cmp.Equal(verbs, want) {
		t.Errorf("set writes of the upgrade: %v, want %v", verbs, want)
	}
}

// A failed create among creates sent together fails the Step with an error
// naming that set; the others are made, and the next Steps create the
// missing one and finish the upgrade, with no shared resource ever absent.
func TestConcurrencyOneWriteFails(t *testing.T) {
	const n = 6
	var failed string
	var mu sync.Mutex
	refuse := func(c handofftest.Call) handofftest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if c.Verb != "create" || failed != "" || !strings.Contains(c.Name, "static-3") {
			return handofftest.Fault{}
		}
		failed = c.Name
		return handofftest.Fault{Mode: handofftest.BeforeCommit, Err: apierrors.NewInternalError(fmt.Errorf("refused"))}
	}
	ctx := context.Background()
	w, v1, v2, roles := installWide(t, n)
	start := w.Cluster.Now()
	w.Executor.Concurrency = 4
	w.Cluster.InjectFaults(refuse, "executor")
	var stepErr error
	for round := 0; round < 10 && stepErr == nil; round++ {
		_, stepErr = w.Executor.Step(ctx, v2)
		if cerr := w.Controller.Reconcile(ctx); cerr != nil {
			t.Fatal(cerr)
		}
	}
	if stepErr == nil || failed == "" {
		t.Fatalf("no Step failed (refused %q)", failed)
	}
	var se *handoff.SetError
	if !errors.As(stepErr, &se) || se.Name != failed {
		t.Errorf("Step error %v: want a *SetError naming %s", stepErr, failed)
	}
	made := liveSetsPer(w.Cluster, w.Family)
	for _, r := range roles {
		want := 1
		if w.Family.SetName("v2", r) == failed {
			want = 0
		}
		if made["v2/"+r] != want {
			t.Errorf("after the failed Step: %d live v2 sets of role %s, want %d", made["v2/"+r], r, want)
		}
	}
	if _, err := w.Converge(ctx, v2, 50); err != nil {
		t.Fatal(err)
	}
	checkUpgrade(t, w, v1, v2, start, "after a refused create")
}

// The operator stopped after each of its calls, at Concurrency 4: the
// upgrade finishes and no shared resource is ever absent.
func TestConcurrencyCrashAtEveryCall(t *testing.T) {
	const n = 4
	w, _, _, _, _, _ := upgradeWide(t, n, 4)
	calls := executorCalls(w.Cluster, "executor")
	for _, mode := range []handofftest.Mode{handofftest.BeforeCommit, handofftest.AfterCommit} {
		for i := 1; i <= calls; i++ {
			w, v1, v2, _ := installWide(t, n)
			w.Executor.Concurrency = 4
			w.Cluster.InjectFaults(handofftest.FailNth(i, mode, nil), "executor")
			start := w.Cluster.Now()
			if err := convergeRestart(t, w, v2, 60); err != nil {
				t.Errorf("fail call %d %s: %v", i, mode, err)
				continue
			}
			checkUpgrade(t, w, v1, v2, start, fmt.Sprintf("fail call %d %s", i, mode))
		}
	}
}
