package handoff

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// State is the coarse readiness of a set.
type State string

// The readiness states. Only [Ready] lets a handoff proceed.
const (
	Ready    State = "Ready"
	NotReady State = "NotReady"
	Unknown  State = "Unknown"
)

// Readiness is what a [Probe] says of a set, with the reason and message of
// the condition it read, for logs and wait actions.
type Readiness struct {
	// State is Ready, NotReady or Unknown.
	State State
	// Reason and Message are copied from the condition the probe read.
	Reason  string
	Message string
	// Pending names, in the order the set lists them, the objects a
	// probe that reads them ([ObjectProbe]) found not rolled out, missing
	// or unreadable: what a NotReady or Unknown set waits for, as data
	// (the Message names the first). Empty for a probe that reads the set
	// alone, and when the set is Ready.
	Pending []Ref
}

// String renders the readiness for a log line.
func (r Readiness) String() string {
	s := string(r.State)
	if s == "" {
		s = string(Unknown)
	}
	if r.Reason != "" {
		s += " (" + r.Reason
		if r.Message != "" {
			s += ": " + r.Message
		}
		s += ")"
	}
	return s
}

// Probe decides whether a set is Ready for its current spec.
type Probe interface {
	Ready(set *unstructured.Unstructured) Readiness
}

// ConditionProbe reads a knative-style condition from status.conditions.
// A set is Ready only when the condition's status is "True" and, where
// status.observedGeneration is present, it equals metadata.generation: a set
// that was Ready for an older spec is not Ready for the current one.
//
// The zero value reads the condition of type "Ready".
type ConditionProbe struct {
	// Type is the condition type to read; empty means "Ready".
	Type string
}

var _ Probe = ConditionProbe{}

// ReasonSuperseded is the reason of the Ready=False condition a set
// controller reports while its set carries the superseded annotation: the
// set does not write what the superseding generation lists, so it is not
// Ready for its spec. On a rollback the executor removes the mark, and only
// the controller's next pass, which applies the set again, makes it Ready.
// [Family.Observe] reads a set that still carries the mark as NotReady with
// this reason, whatever its condition says.
const ReasonSuperseded = "Superseded"

// Reasons a [ConditionProbe] gives when the condition itself does not.
const (
	ReasonNoStatus  = "NoStatus"
	ReasonStale     = "StaleStatus"
	ReasonNoReason  = "ConditionNotTrue"
	ReasonMalformed = "MalformedStatus"
)

// Ready implements [Probe].
func (p ConditionProbe) Ready(set *unstructured.Unstructured) Readiness {
	typ := p.Type
	if typ == "" {
		typ = "Ready"
	}
	if set == nil {
		return Readiness{State: Unknown, Reason: ReasonNoStatus, Message: "no object"}
	}
	status, ok := set.Object["status"].(map[string]any)
	if !ok {
		return Readiness{State: Unknown, Reason: ReasonNoStatus, Message: "no status yet"}
	}
	if og, found, err := unstructured.NestedInt64(status, "observedGeneration"); err != nil {
		return Readiness{State: Unknown, Reason: ReasonMalformed, Message: err.Error()}
	} else if found && og != set.GetGeneration() {
		return Readiness{State: NotReady, Reason: ReasonStale,
			Message: fmt.Sprintf("status is for generation %d, spec is at %d", og, set.GetGeneration())}
	}
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		cond, ok := c.(map[string]any)
		if !ok || cond["type"] != typ {
			continue
		}
		reason, _ := cond["reason"].(string)
		msg, _ := cond["message"].(string)
		switch cond["status"] {
		case "True":
			return Readiness{State: Ready, Reason: reason, Message: msg}
		case "False":
			if reason == "" {
				reason = ReasonNoReason
			}
			return Readiness{State: NotReady, Reason: reason, Message: msg}
		default:
			if reason == "" {
				reason = ReasonNoReason
			}
			return Readiness{State: Unknown, Reason: reason, Message: msg}
		}
	}
	return Readiness{State: Unknown, Reason: ReasonNoStatus, Message: fmt.Sprintf("no %s condition yet", typ)}
}

// ObjectProbe is a [Probe] that decides from the live objects a set lists
// rather than from the set object: a set kind with no controller to report
// Ready (an inventory that records what the operator applies itself) is
// Ready when what it lists is rolled out.
//
// [Family.Observe] reads such a set with Ready, which cannot see the
// objects and so never says Ready; the [Executor] then reads, for each
// live set of the family, the listed resources Reads selects, with one
// List per (group-kind, namespace) like its other reads, and takes
// ReadyFrom's answer instead. A Planner fed by Observe alone therefore
// waits, which is the safe side.
type ObjectProbe interface {
	Probe
	// Reads reports whether the probe needs the live object of a listed
	// resource (a Deployment, say, and not a ConfigMap).
	Reads(ref Ref) bool
	// ReadyFrom decides from the live objects of the set's resources that
	// Reads selected; live returns one of them, or an error (NotFound when
	// it does not exist).
	ReadyFrom(set Set, live func(Ref) (*unstructured.Unstructured, error)) Readiness
}
