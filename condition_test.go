package handoff

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStepCondition(t *testing.T) {
	wait := func(set string, r Readiness) Action {
		return Action{Kind: ActionWait, Set: set, Generation: "v2", Role: "deployment", Reason: r.String(), Readiness: r}
	}
	tests := map[string]struct {
		res  Result
		err  error
		want Condition
	}{
		"an error is False with its text": {
			err:  errors.New(`set "x": create: forbidden`),
			want: Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: ReasonStepFailed, Message: `set "x": create: forbidden`},
		},
		"a settled plan is True": {
			res:  Result{Plan: Plan{Phase: PhaseSteady}},
			want: Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: ReasonSettled},
		},
		"a set reporting a failure makes it False with the set's reason and message": {
			res: Result{Requeue: true, Waiting: []Action{
				wait("p-static", Readiness{State: Unknown, Reason: ReasonNoStatus, Message: "no Ready condition yet"}),
				wait("p-deployment", Readiness{State: NotReady, Reason: "Error", Message: "tekton-pipelines-webhook deployment not ready"}),
			}},
			want: Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Error",
				Message: "set p-deployment (v2/deployment) is not ready: tekton-pipelines-webhook deployment not ready"},
		},
		"a message with a colon and parentheses survives": {
			res: Result{Requeue: true, Waiting: []Action{
				wait("p", Readiness{State: NotReady, Reason: "Error", Message: "apply: webhook (x) refused: EOF"}),
			}},
			want: Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Error",
				Message: "set p (v2/deployment) is not ready: apply: webhook (x) refused: EOF"},
		},
		"a set that is superseded, stale or deleting is progress, not failure": {
			res: Result{Requeue: true, Waiting: []Action{
				wait("a", Readiness{State: NotReady, Reason: ReasonSuperseded, Message: "superseded by generation v3"}),
				wait("b", Readiness{State: NotReady, Reason: ReasonStale, Message: "status is for generation 1, spec is at 2"}),
			}},
			want: Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: ReasonInProgress,
				Message: "waiting: Wait a (v2/deployment): NotReady (Superseded: superseded by generation v3); " +
					"Wait b (v2/deployment): NotReady (StaleStatus: status is for generation 1, spec is at 2)"},
		},
		"a rollout under way, or not applied yet, is progress": {
			res: Result{Requeue: true, Waiting: []Action{
				wait("a", Readiness{State: NotReady, Reason: ReasonRolloutInProgress, Message: "Deployment ns/x: 1 of 2 updated replicas available"}),
				wait("b", Readiness{State: NotReady, Reason: ReasonRolloutNotApplied, Message: "Deployment ns/y: not applied for b yet"}),
			}},
			want: Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: ReasonInProgress,
				Message: "waiting: Wait a (v2/deployment): NotReady (RolloutInProgress: Deployment ns/x: 1 of 2 updated replicas available); " +
					"Wait b (v2/deployment): NotReady (RolloutNotApplied: Deployment ns/y: not applied for b yet)"},
		},
		"a failed rollout is a failure": {
			res: Result{Requeue: true, Waiting: []Action{
				wait("a", Readiness{State: NotReady, Reason: ReasonRolloutFailed, Message: "Deployment ns/x: ProgressDeadlineExceeded"}),
			}},
			want: Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: ReasonRolloutFailed,
				Message: "set a (v2/deployment) is not ready: Deployment ns/x: ProgressDeadlineExceeded"},
		},
		"creates with nothing to wait on yet are progress": {
			res: Result{Requeue: true, Plan: Plan{Phase: PhaseInstall, Actions: []Action{{Kind: ActionCreate}, {Kind: ActionCreate}}}},
			want: Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: ReasonInProgress,
				Message: "phase Install: 2 actions taken"},
		},
		"a wait for a dependency is progress": {
			res: Result{Requeue: true, Waiting: []Action{{Kind: ActionWait, Role: "deployment", Generation: "v2",
				Reason: "waits for role static to be Ready: NotReady (Error: boom)"}}},
			want: Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: ReasonInProgress,
				Message: "waiting: Wait (v2/deployment): waits for role static to be Ready: NotReady (Error: boom)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := StepCondition("Ready", tc.res, tc.err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("StepCondition (-want +got):\n%s", d)
			}
		})
	}
}
