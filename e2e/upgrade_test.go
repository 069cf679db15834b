//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

type row struct {
	scenario string
	deleted  int
	longest  time.Duration
	writes   int
	took     time.Duration
}

var (
	summaryMu sync.Mutex
	summary   []row
)

func record(r row) {
	summaryMu.Lock()
	defer summaryMu.Unlock()
	summary = append(summary, r)
}

// mon is the one monitor of the test binary, started by the first test
// that needs it.
var (
	monOnce sync.Once
	mon     *monitor
)

func monitorFor(t *testing.T) *monitor {
	t.Helper()
	monOnce.Do(func() {
		dyn, err := dynamic.NewForConfig(cp.Config())
		if err != nil {
			t.Fatal(err)
		}
		mon = startMonitor(t, context.Background(), dyn)
	})
	return mon
}

// Scenarios 1 and 2: the handoff with Foreground and Background
// retirement, and the same upgrade done as tektoncd/operator does today.
func TestUpgrade(t *testing.T) {
	ctx := context.Background()
	mon := monitorFor(t)

	for _, tc := range []struct {
		name string
		prop metav1.DeletionPropagation
	}{{"foreground", metav1.DeletePropagationForeground}, {"background", metav1.DeletePropagationBackground}} {
		t.Run("handoff-"+tc.name, func(t *testing.T) {
			e := newEnv(t, tc.name, tc.prop)
			e.converge(ctx, e.desire("v1"))
			writes := e.writes
			v2 := e.desire("v2")
			began := time.Now()
			e.converge(ctx, v2)
			took := time.Since(began)
			time.Sleep(2 * time.Second) // give the garbage collector time
			e.checkEnd(ctx, "v1", "v2")
			_, keys := e.shared("v1", "v2")
			deleted, longest := mon.stats(keys, began)
			if len(deleted) != 0 {
				t.Errorf("shared resources deleted during the upgrade: %v", deleted)
			}
			record(row{"handoff/" + tc.name, len(deleted), longest, e.writes - writes, took})
		})
	}

	t.Run("legacy", func(t *testing.T) {
		e := newEnv(t, "legacy", "")
		e.converge(ctx, e.desire("v1"))
		writes := e.writes
		v2 := e.desire("v2")
		began := time.Now()
		e.ctrl.Legacy = true
		e.writes += e.legacyRetire(ctx, nil, 60*time.Second)
		e.converge(ctx, v2)
		e.ctrl.Legacy = false
		took := time.Since(began)
		time.Sleep(2 * time.Second)
		e.checkEnd(ctx, "v1", "v2")
		_, keys := e.shared("v1", "v2")
		deleted, longest := mon.stats(keys, began)
		if len(deleted) == 0 {
			t.Errorf("legacy upgrade deleted no shared resource; the monitor should have seen deletions")
		}
		// Today's flow deletes v1's sets before v2's exist: the event-stream
		// check of I5 must see that.
		if errs := mon.gating(e.fam, v2, began, time.Now()); len(errs) != 2 {
			t.Errorf("I5 check of the legacy flow: %d violations, want one per v1 set: %v", len(errs), errs)
		}
		t.Logf("legacy: %d of %d shared resources deleted, longest absence %d ms", len(deleted), len(keys), longest.Milliseconds())
		record(row{"legacy", len(deleted), longest, e.writes - writes, took})
	})

	t.Logf("%-22s %8s %12s %11s %10s", "scenario", "deleted", "absence ms", "exec writes", "upgrade")
	for _, r := range summary {
		t.Logf("%-22s %8d %12d %11d %10v", r.scenario, r.deleted, r.longest.Milliseconds(), r.writes, r.took.Round(time.Millisecond))
	}
}

// legacyRetire is the first half of an upgrade as tektoncd/operator does
// it today (CleanupMainSet): it deletes every set of the family,
// Foreground, through del (nil: the env's client), then runs the set
// controller until they are gone; it fails the test after wait. With
// e.ctrl.Legacy set, the controller's finalizer deletes every resource a
// set lists, by name. The second half is an ordinary convergence to the
// new generation, whose sets are created into an empty family. It returns
// the number of sets deleted.
func (e *env) legacyRetire(ctx context.Context, del func(ctx context.Context, name string, opts metav1.DeleteOptions) error, wait time.Duration) int {
	e.t.Helper()
	if del == nil {
		del = func(ctx context.Context, name string, opts metav1.DeleteOptions) error {
			return e.dyn.Resource(e.fam.Resource).Delete(ctx, name, opts)
		}
	}
	sets, err := e.sets(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	fg := metav1.DeletePropagationForeground
	for _, s := range sets {
		if err := del(ctx, s.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
			e.t.Fatal(err)
		}
	}
	deadline := time.Now().Add(wait)
	for {
		if time.Now().After(deadline) {
			e.t.Fatalf("sets not gone after %v", wait)
		}
		if err := e.ctrl.Reconcile(ctx); err != nil {
			e.t.Logf("reconcile: %v (retrying)", err)
		}
		left, err := e.sets(ctx)
		if err == nil && len(left) == 0 {
			return len(sets)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Scenario 3: with the set controller running on its own beside the
// executor, as in an operator, no shared resource is written back to the
// old generation's content once the new generation wrote it, and none is
// written more often than the new content needs.
func TestNoTugOfWar(t *testing.T) {
	ctx := context.Background()
	mon := monitorFor(t)
	e := newEnv(t, "tug", "")
	stop := e.runController(ctx)
	defer stop()
	e.drive(ctx, e.exec, e.desire("v1"), nil)
	began := time.Now()
	v2 := e.desire("v2")
	e.drive(ctx, e.exec, v2, nil)
	stop()
	e.checkEnd(ctx, "v1", "v2")
	for _, err := range mon.gating(e.fam, v2, began, time.Now()) {
		t.Error(err)
	}

	_, keys := e.shared("v1", "v2")
	most, total := 0, 0
	for _, k := range keys {
		var versions []string // the content versions the resource went through
		for _, ev := range mon.since(k, began) {
			if ev.typ == watch.Deleted {
				t.Errorf("%s deleted during the upgrade", k)
			}
			if v := ev.labels[versionLabel]; len(versions) == 0 || versions[len(versions)-1] != v {
				versions = append(versions, v)
			}
		}
		// The first event may still show v1 (a write of ownership or
		// status); from the first v2 on, every event must show v2.
		if i := slices.Index(versions, "v2"); i < 0 || i != len(versions)-1 {
			t.Errorf("%s went through contents %v; want v2 to be the last and stay", k, versions)
		}
		// One write by the set controller (v2's content and owner); a
		// Deployment gets one more, the deployment controller's revision
		// annotation for its new ReplicaSet. More is a fight.
		writes, bound := mon.writes(k, began), 1
		if strings.HasPrefix(k, "Deployment/") {
			bound = 2
		}
		if writes > bound {
			t.Errorf("%s written %d times during the upgrade, want at most %d", k, writes, bound)
		}
		most, total = max(most, writes), total+writes
	}
	t.Logf("tug-of-war: %d shared resources, none written back to v1; writes per resource: at most %d, %d in all", len(keys), most, total)
}
