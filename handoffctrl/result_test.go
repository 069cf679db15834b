package handoffctrl_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handoffctrl"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestResult(t *testing.T) {
	wait := handoff.Action{Kind: handoff.ActionWait, Role: "part-0", Generation: "v2", Reason: "not Ready"}
	failed := fmt.Errorf("configmap ns/x: %w", handoff.ErrStaleMapper)
	tests := map[string]struct {
		requeue handoffctrl.Requeue
		res     handoff.Result
		err     error
		want    ctrl.Result
		wantErr error
	}{
		"a settled plan is not requeued": {
			res: handoff.Result{}, want: ctrl.Result{},
		},
		"an error is returned as it is, with no requeue of its own": {
			res: handoff.Result{Requeue: true, Waiting: []handoff.Action{wait}}, err: failed,
			want: ctrl.Result{}, wantErr: failed,
		},
		"a wait requeues after the default interval": {
			res:  handoff.Result{Requeue: true, Waiting: []handoff.Action{wait}},
			want: ctrl.Result{RequeueAfter: handoffctrl.DefaultRequeueAfter},
		},
		"a wait requeues after the interval the caller chose": {
			requeue: handoffctrl.Requeue{After: 3 * time.Second},
			res:     handoff.Result{Requeue: true, Waiting: []handoff.Action{wait}},
			want:    ctrl.Result{RequeueAfter: 3 * time.Second},
		},
		"a negative interval means the default": {
			requeue: handoffctrl.Requeue{After: -time.Second},
			res:     handoff.Result{Requeue: true, Waiting: []handoff.Action{wait}},
			want:    ctrl.Result{RequeueAfter: handoffctrl.DefaultRequeueAfter},
		},
		"writes with nothing to wait for requeue at once": {
			res:  handoff.Result{Requeue: true, Writes: []handoff.Call{{Verb: "create"}}},
			want: ctrl.Result{Requeue: true},
		},
		"an interrupted Step requeues at once, even while it waits": {
			requeue: handoffctrl.Requeue{After: time.Minute},
			res:     handoff.Result{Requeue: true, Interrupted: true, Waiting: []handoff.Action{wait}},
			want:    ctrl.Result{Requeue: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.requeue.Result(tc.res, tc.err)
			if d := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
			if tc.err != nil && !errors.Is(err, handoff.ErrStaleMapper) {
				t.Errorf("error %v does not wrap %v", err, handoff.ErrStaleMapper)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ctrl.Result (-want +got):\n%s", d)
			}
			if tc.requeue == (handoffctrl.Requeue{}) {
				got, err := handoffctrl.Result(tc.res, tc.err)
				if d := cmp.Diff(tc.want, got); d != "" || !errors.Is(err, tc.wantErr) {
					t.Errorf("Result differs from Requeue{}.Result: %v, %v (-want +got):\n%s", got, err, d)
				}
			}
		})
	}
}
