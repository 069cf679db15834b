package handoffctrl

import (
	"time"

	"github.com/kube-handoff/handoff"
	ctrl "sigs.k8s.io/controller-runtime"
)

// DefaultRequeueAfter is how long a reconciler waits before it reconciles
// again while a Step waits (a rollout under way, a set being finalized),
// when [Requeue.After] is zero.
const DefaultRequeueAfter = 10 * time.Second

// Requeue says how a reconciler requeues after an [handoff.Executor.Step];
// its Result method turns what Step returned into what a
// controller-runtime reconciler returns. The zero value requeues after
// [DefaultRequeueAfter].
type Requeue struct {
	// After is how long to wait before the next reconcile while the Step
	// waits; zero means DefaultRequeueAfter.
	After time.Duration
}

// Result returns what a reconciler returns after Step returned res and
// err:
//
//   - err not nil: ctrl.Result{} and err as it is, so controller-runtime
//     retries with its rate limiter's backoff (and errors.Is/As still see
//     [handoff.ErrStaleMapper], a [*handoff.DiscoveryError], …);
//   - res.Interrupted (the Step's [handoff.Executor.StepTimeout] ran
//     out): Requeue, at once — the next Step goes on from there;
//   - res.Requeue with nothing in res.Waiting (the Step wrote, and the
//     next Step carries on from its writes): Requeue, at once;
//   - res.Requeue with waits: RequeueAfter r.After;
//   - otherwise (the plan is settled): ctrl.Result{}.
//
// "At once" is ctrl.Result{Requeue: true}: the work queue's rate limiter
// spaces such requeues of one object (by default 5ms, doubling each time
// until the object is reconciled without one), so nothing spins.
//
// A wait is always requeued after r.After, even one that an informer
// event may end: res.Waiting says what a Step waits for (a set's
// readiness, read from the objects it lists, or a set being finalized),
// not whether the reconciler watches it, so the timer is the backstop.
// An event that comes first reconciles sooner; the work queue keeps one
// request per object, so the timer then costs one more reconcile at most.
//
// Result can be called on Step directly:
//
//	return handoffctrl.Requeue{}.Result(exec.Step(ctx, desired))
func (r Requeue) Result(res handoff.Result, err error) (ctrl.Result, error) {
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case res.Interrupted:
		return ctrl.Result{Requeue: true}, nil
	case !res.Requeue:
		return ctrl.Result{}, nil
	case len(res.Waiting) == 0:
		return ctrl.Result{Requeue: true}, nil
	}
	after := r.After
	if after <= 0 {
		after = DefaultRequeueAfter
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// Result is Requeue{}.Result: a wait requeues after
// [DefaultRequeueAfter].
//
//	return handoffctrl.Result(exec.Step(ctx, nil))
func Result(res handoff.Result, err error) (ctrl.Result, error) {
	return Requeue{}.Result(res, err)
}
