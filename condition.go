package handoff

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition is a status condition in the shape knative's apis.Condition
// and metav1.Condition share, for an operator to copy into its component's
// status (tektoncd/operator: MarkInstallerSetReady, or
// MarkInstallerSetNotReady with the message).
type Condition struct {
	// Type is the condition type the caller asked for.
	Type string
	// Status is True when the step settled, False when it failed or waits
	// on a set that reports a failure, Unknown while it waits on progress.
	Status metav1.ConditionStatus
	// Reason is CamelCase: a Reason… constant below, or the failing set's
	// own condition reason.
	Reason string
	// Message says why, naming the set waited on.
	Message string
}

// String renders the condition for a log line.
func (c Condition) String() string {
	s := fmt.Sprintf("%s=%s", c.Type, c.Status)
	if c.Reason != "" {
		s += " " + c.Reason
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

// Reasons of the conditions [StepCondition] builds.
const (
	// ReasonStepFailed: Step returned an error.
	ReasonStepFailed = "HandoffStepFailed"
	// ReasonInProgress: sets are being created, updated, marked or
	// retired, or the step waits on sets that report no failure.
	ReasonInProgress = "HandoffInProgress"
	// ReasonSettled: every desired set is Ready and nothing is left to do.
	ReasonSettled = "HandoffSettled"
)

// transient are the set readiness reasons that say a set is on its way,
// not failing: a fresh spec, a mark just removed, a set going away.
var transient = map[string]bool{
	ReasonStale:      true,
	ReasonSuperseded: true,
	ReasonNoStatus:   true,
	"Deleting":       true,
	// What a set whose readiness is read from the objects it lists
	// ([RolloutProbe]) waits for on an upgrade that goes well.
	ReasonRolloutInProgress: true,
	ReasonRolloutMissing:    true,
	ReasonRolloutNotApplied: true,
	ReasonRolloutUnread:     true,
}

// StepCondition turns what one [Executor.Step] returned into a condition of
// type typ:
//
//   - err non-nil: False, [ReasonStepFailed], the error's text;
//   - the plan is settled: True, [ReasonSettled];
//   - it waits on a set whose Ready condition is False for a reason other
//     than a transient one (a stale status, the superseded mark, a set
//     being deleted): False, that set's reason, and its message prefixed
//     with the set's name — the set controller's failure reaches the
//     component's status;
//   - otherwise: Unknown, [ReasonInProgress], the wait reasons or the
//     plan's phase.
//
// The readiness of a waited-on set is the wait action's
// [Action.Readiness].
func StepCondition(typ string, res Result, err error) Condition {
	c := Condition{Type: typ}
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonStepFailed, err.Error()
		return c
	case !res.Requeue:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonSettled
		return c
	}
	var waits []string
	for _, a := range res.Waiting {
		if r := a.Readiness; r.State == NotReady && !transient[r.Reason] {
			c.Status, c.Reason = metav1.ConditionFalse, r.Reason
			c.Message = fmt.Sprintf("set %s (%s/%s) is not ready", a.Set, a.Generation, a.Role)
			if r.Message != "" {
				c.Message += ": " + r.Message
			}
			return c
		}
		waits = append(waits, a.String())
	}
	c.Status, c.Reason = metav1.ConditionUnknown, ReasonInProgress
	if len(waits) > 0 {
		c.Message = "waiting: " + strings.Join(waits, "; ")
	} else {
		c.Message = fmt.Sprintf("phase %s: %d actions taken", res.Plan.Phase, len(res.Plan.Actions))
	}
	return c
}
