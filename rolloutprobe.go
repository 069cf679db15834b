package handoff

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RolloutProbe is the [ObjectProbe] of a set kind with no controller of
// its own, an inventory: the set is Ready when every object it lists is
// rolled out as [Rollout] says. It reads the objects of [RolloutKinds]
// and takes every other listed object as rolled out.
//
// With Stamped, an object counts only once it was written for the set: its
// [WriterAnnotation] (see [Guard.Stamp]) names the set's UID. Successive
// generations of an operator that applies in place list the same objects
// under the same names, and a Deployment that still runs the old
// generation's spec is rolled out as far as its status goes; the stamp
// tells it from one the operator has applied for the new set, so an
// apply that failed, or has not run yet, is never taken for a finished
// rollout.
type RolloutProbe struct {
	Stamped bool
	// Skip names kinds of RolloutKinds that do not gate readiness: their
	// objects are neither read nor waited for (an operator whose Jobs run
	// after the workloads they need, may fail and be retried, and are
	// deleted by their TTL, gives batch Job here).
	Skip []schema.GroupKind
}

var _ ObjectProbe = RolloutProbe{}

// Reads implements [ObjectProbe]: it selects the resources of
// [RolloutKinds] but those of the kinds in Skip.
func (p RolloutProbe) Reads(ref Ref) bool {
	gk := ref.GroupKind()
	return hasRollout(gk) && !slices.Contains(p.Skip, gk)
}

// Ready implements [Probe]. The set object does not say whether what it
// lists is rolled out, so Ready is NotReady with [ReasonRolloutUnread]:
// the [Executor] reads the listed objects and asks ReadyFrom instead.
func (RolloutProbe) Ready(set *unstructured.Unstructured) Readiness {
	what := "the set"
	if set != nil {
		what = "set " + set.GetName()
	}
	return Readiness{State: NotReady, Reason: ReasonRolloutUnread,
		Message: "the executor reads the objects " + what + " lists to tell whether they are rolled out"}
}

// ReadyFrom implements [ObjectProbe]. It walks set.Resources in order and
// asks live for each one Reads selects: NotFound is NotReady with
// [ReasonRolloutMissing], another error Unknown with
// [ReasonRolloutReadError], an object what [Rollout] says of it. It
// returns the first answer that is not Ready, so the reason and message
// name the first listed object not rolled out, with " (and N more)" added
// to the message when N others are not either; Pending names them all.
// When all are Ready it is Ready with [ReasonRolledOut] and a count, "12
// workloads rolled out".
func (p RolloutProbe) ReadyFrom(set Set, live func(Ref) (*unstructured.Unstructured, error)) Readiness {
	var first *Readiness
	var pending []Ref
	read, more := 0, 0
	for _, ref := range set.Resources {
		if !p.Reads(ref) {
			continue
		}
		read++
		r := p.readLive(set, ref, live)
		if r.State == Ready {
			continue
		}
		pending = append(pending, ref)
		if first == nil {
			first = &r
		} else {
			more++
		}
	}
	if first == nil {
		return Readiness{State: Ready, Reason: ReasonRolledOut, Message: plural(int64(read), "workload", "workloads") + " rolled out"}
	}
	out := *first
	out.Pending = pending
	if more > 0 {
		out.Message += fmt.Sprintf(" (and %d more)", more)
	}
	return out
}

// readLive reads one listed object and says whether it is rolled out.
func (p RolloutProbe) readLive(set Set, ref Ref, live func(Ref) (*unstructured.Unstructured, error)) Readiness {
	name := objectName(ref.Kind, ref.Namespace, ref.Name)
	obj, err := live(ref)
	switch {
	case apierrors.IsNotFound(err):
		return Readiness{State: NotReady, Reason: ReasonRolloutMissing, Message: name + ": not created yet"}
	case err != nil:
		return Readiness{State: Unknown, Reason: ReasonRolloutReadError, Message: fmt.Sprintf("%s: %v", name, err)}
	case obj == nil:
		return Readiness{State: Unknown, Reason: ReasonRolloutReadError, Message: name + ": read returned no object"}
	}
	if p.Stamped {
		if by := parseStamp(obj.GetAnnotations()[WriterAnnotation]).uid; by != set.UID {
			who := "nobody"
			if by != "" {
				who = "set " + string(by)
			}
			return Readiness{State: NotReady, Reason: ReasonRolloutNotApplied,
				Message: fmt.Sprintf("%s: not applied for %s yet (last written by %s)", name, set.Name, who)}
		}
	}
	return Rollout(obj)
}
