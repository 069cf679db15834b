package handoff

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder receives Kubernetes Events about a handoff. client-go's
// record.EventRecorder satisfies it, so an operator passes the recorder it
// already has; the library imports no event machinery of its own.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Reasons of the Events the executor records.
const (
	// EventSetCreated: a set of the desired generation was created.
	EventSetCreated = "SetCreated"
	// EventWaiting: the Step waits, for the reasons in the message.
	EventWaiting = "Waiting"
	// EventSetRetired: an old set was retired (deleted by name and UID),
	// what it lists handed over or released first.
	EventSetRetired = "SetRetired"
	// EventPruned: a set was finalized; the message counts what was
	// deleted, left to the garbage collector, handed over and kept.
	EventPruned = "Pruned"
	// EventFailed: a Step or Finalize failed (Warning).
	EventFailed = "HandoffFailed"
)

// Metrics receives the executor's measurements. An operator backs it with
// its own Prometheus registry (a counter vector for Add, a histogram vector
// for Observe, keyed by name), so the library needs no metrics dependency.
// labels are name, value pairs, the same names every time for one metric
// (listed with each name below).
type Metrics interface {
	// Add adds value to a counter.
	Add(name string, value float64, labels ...string)
	// Observe records one observation, in seconds, of a histogram.
	Observe(name string, seconds float64, labels ...string)
}

// The metrics the executor reports.
const (
	// MetricAPICalls counts the executor's API calls; label "verb" (list,
	// get, create, update, patch, delete).
	MetricAPICalls = "handoff_api_calls_total"
	// MetricObjectsPruned counts obsolete objects a finalization removed,
	// deleted or left to the garbage collector; no labels.
	MetricObjectsPruned = "handoff_objects_pruned_total"
	// MetricObjectsKept counts objects a finalization or retirement kept:
	// handed over, kept in place, released; no labels.
	MetricObjectsKept = "handoff_objects_kept_total"
	// MetricHandoffSeconds observes, when a Step retires the old
	// generation, the time since the desired generation's first set was
	// created; no labels.
	MetricHandoffSeconds = "handoff_duration_seconds"
	// MetricWaitSeconds observes, once per Step and waited-on set, how long
	// the set has existed without being Ready; label "reason" (the set's
	// readiness reason, or "Missing" for a role whose set is not created
	// yet).
	MetricWaitSeconds = "handoff_wait_seconds"
)

// event records an Event on the executor's component, if it has both.
func (r *run) event(eventtype, reason, format string, args ...any) {
	if r.e.Recorder == nil || r.e.Component == nil || r.e.DryRun {
		return
	}
	r.e.Recorder.Eventf(r.e.Component, eventtype, reason, format, args...)
}

func (r *run) add(name string, v float64, labels ...string) {
	if r.e.Metrics != nil && v != 0 && !r.e.DryRun {
		r.e.Metrics.Add(name, v, labels...)
	}
}

func (r *run) observeSeconds(name string, d time.Duration, labels ...string) {
	if r.e.Metrics != nil && !r.e.DryRun {
		r.e.Metrics.Observe(name, d.Seconds(), labels...)
	}
}

// reportCalls adds the call's API calls by verb to MetricAPICalls.
func (r *run) reportCalls() {
	if r.e.Metrics == nil {
		return
	}
	byVerb := map[string]int{"list": r.setReads.lists + r.live.reads.Lists, "get": r.setReads.gets + r.live.reads.Gets}
	for _, c := range r.writes {
		byVerb[c.Verb]++
	}
	for _, verb := range []string{"list", "get", "create", "update", "patch", "delete"} {
		r.add(MetricAPICalls, float64(byVerb[verb]), "verb", verb)
	}
}

// reportStep records the Events and metrics of a Step towards generation
// gen ("" for a removal) that carried out plan, err being what it returns.
func (r *run) reportStep(plan Plan, gen string, res Result, err error) {
	defer r.reportCalls()
	if err != nil {
		r.event(corev1.EventTypeWarning, EventFailed, "%v", err)
		return
	}
	now := time.Now()
	var waits []string
	for _, a := range res.Waiting {
		waits = append(waits, a.String())
		reason := a.Readiness.Reason
		if a.Set == "" {
			reason = "Missing"
		}
		if s, ok := r.setNamed(a.Set); ok && !s.Created.IsZero() {
			r.observeSeconds(MetricWaitSeconds, now.Sub(s.Created), "reason", reason)
		}
	}
	if len(waits) > 0 && !r.recordOnly { // the Step after the apply reports them
		r.event(corev1.EventTypeNormal, EventWaiting, "waiting: %s", strings.Join(waits, "; "))
	}
	for _, c := range r.writes {
		if c.Verb == "create" && c.Resource == r.family.Resource.Resource {
			r.event(corev1.EventTypeNormal, EventSetCreated, "created set %s", c.Name)
		}
	}
	retired := plan.Of(ActionRetire)
	handoff := false // a set of the family retired, not only records of what an update dropped
	for _, a := range retired {
		r.event(corev1.EventTypeNormal, EventSetRetired, "retired set %s (%s/%s): %s", a.Set, a.Generation, a.Role, a.Reason)
		handoff = handoff || !isRecord(a.Generation, a.Role, gen)
	}
	if handoff && gen != "" && plan.Phase == PhaseHandoff && !res.Interrupted {
		var first time.Time
		for _, s := range r.view {
			if s.Generation == gen && !s.Deleting && (first.IsZero() || s.Created.Before(first)) {
				first = s.Created
			}
		}
		if !first.IsZero() {
			r.observeSeconds(MetricHandoffSeconds, now.Sub(first))
		}
	}
	r.add(MetricObjectsKept, float64(r.keptCount))
}

// reportFinalize records the Event and metrics of a finalization.
func (r *run) reportFinalize(set string, res FinalizeResult, err error) {
	defer r.reportCalls()
	if err != nil {
		r.event(corev1.EventTypeWarning, EventFailed, "finalize set %s: %v", set, err)
		return
	}
	pruned := len(res.Deleted) + len(res.Collected)
	kept := len(res.HandedOver) + len(res.Kept)
	r.event(corev1.EventTypeNormal, EventPruned, "finalized set %s: %s", set, fmt.Sprintf(
		"%d deleted, %d left to the garbage collector, %d handed over, %d kept, %d skipped, %d of kinds not served",
		len(res.Deleted), len(res.Collected), len(res.HandedOver), len(res.Kept), len(res.Skipped), len(res.Unserved)))
	r.add(MetricObjectsPruned, float64(pruned))
	r.add(MetricObjectsKept, float64(kept))
}
