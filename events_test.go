package handoff_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// client-go's recorder is what operators hold.
var _ handoff.EventRecorder = record.EventRecorder(nil)

// fakeMetrics keeps counters and observations by name and labels.
type fakeMetrics struct {
	mu       sync.Mutex
	counters map[string]float64
	observed map[string]int
}

func key(name string, labels []string) string { return name + "{" + strings.Join(labels, ",") + "}" }

func (m *fakeMetrics) Add(name string, v float64, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counters[key(name, labels)] += v
}

func (m *fakeMetrics) Observe(name string, seconds float64, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seconds < 0 {
		panic("negative duration")
	}
	m.observed[key(name, labels)]++
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func countPrefix(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// An upgrade records, on the component, the sets created, the waits and
// the retirements; the API calls it reports by verb are the calls the
// cluster saw from it, one for one.
func TestStepEventsAndMetrics(t *testing.T) {
	ctx := context.Background()
	w := handofftest.NewWorld("Comp")
	v1 := w.Desire("v1", staticDeploy, small("v1"))
	v2 := w.Desire("v2", staticDeploy, small("v2"))
	if _, err := w.Converge(ctx, v1, 50); err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(1000)
	m := &fakeMetrics{counters: map[string]float64{}, observed: map[string]int{}}
	component := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "comp", Namespace: testNS}}
	w.Executor.Recorder, w.Executor.Component, w.Executor.Metrics = rec, component, m
	w.Cluster.ClearActions()
	if _, err := w.Converge(ctx, v2, 50); err != nil {
		t.Fatal(err)
	}
	events := drain(rec)
	for prefix, want := range map[string]int{
		"Normal " + handoff.EventSetCreated: 2,
		"Normal " + handoff.EventSetRetired: 2,
		"Warning ":                          0,
	} {
		if got := countPrefix(events, prefix); got != want {
			t.Errorf("%d events %q, want %d:\n%s", got, prefix, want, strings.Join(events, "\n"))
		}
	}
	if countPrefix(events, "Normal "+handoff.EventWaiting) == 0 {
		t.Errorf("no Waiting event:\n%s", strings.Join(events, "\n"))
	}
	calls := callsOf(w.Cluster, "executor")
	for _, verb := range callVerbs {
		if got := m.counters[key(handoff.MetricAPICalls, []string{"verb", verb})]; got != float64(calls[verb]) {
			t.Errorf("%s calls reported %v, the cluster saw %d", verb, got, calls[verb])
		}
	}
	if n := m.observed[key(handoff.MetricHandoffSeconds, nil)]; n != 1 {
		t.Errorf("handoff duration observed %d times, want once", n)
	}
	if n := m.observed[key(handoff.MetricWaitSeconds, []string{"reason", handoff.ReasonNoStatus})]; n == 0 {
		t.Errorf("no wait observed for sets without a status yet: %v", m.observed)
	}
}

// A finalization records what it pruned and kept: the Namespace and the
// webhook configuration v2 lists are kept, the ConfigMaps handed over, and
// the ConfigMap only v1 lists left to the garbage collector.
func TestFinalizeEventsAndMetrics(t *testing.T) {
	_, e, old, _ := finUpgradeStarted(t)
	rec := record.NewFakeRecorder(10)
	m := &fakeMetrics{counters: map[string]float64{}, observed: map[string]int{}}
	e.Recorder, e.Component, e.Metrics = rec, old, m
	if _, err := e.Finalize(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	want := []string{"Normal " + handoff.EventPruned + " finalized set " + old.GetName() +
		": 0 deleted, 1 left to the garbage collector, 2 handed over, 2 kept, 0 skipped, 0 of kinds not served"}
	if d := cmp.Diff(want, drain(rec)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]float64{
		key(handoff.MetricObjectsPruned, nil):                  1,
		key(handoff.MetricObjectsKept, nil):                    4,
		key(handoff.MetricAPICalls, []string{"verb", "list"}):  float64(len(finWantCalls) - 2),
		key(handoff.MetricAPICalls, []string{"verb", "patch"}): 2,
	}, m.counters); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
}
