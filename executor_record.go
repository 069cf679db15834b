package handoff

import (
	"context"
	"slices"
)

// Record runs a Step that only records: it creates or updates the desired
// generation's sets, and marks the sets it supersedes, as Step would, but
// retires, finalizes and prunes nothing, so it deletes nothing. What it
// held back stays in [Result.Plan] (with Requeue true), for a later Step
// to carry out. An operator that applies its manifests in place calls it
// before the apply, so that the apply is recorded first and an error of a
// retirement never keeps a new spec from being applied; the Step after the
// apply retires.
//
// desired nil, or with no Build and no [Executor.Build], is a
// [*ConfigError]: removing a component is deleting.
func (e *Executor) Record(ctx context.Context, desired *Desired) (Result, error) {
	if desired == nil {
		return Result{}, &ConfigError{Object: "executor of " + e.Family.describe(), Problems: []FieldProblem{{
			Field: "desired", Reason: "Record needs a desired generation (a removal deletes: Step(ctx, nil) removes)"}}}
	}
	r, err := e.start(desired.Build == nil)
	if err != nil {
		return Result{}, err
	}
	r.recordOnly = true
	res, plan, err := r.step(ctx, desired)
	r.reportStep(plan, desired.Generation, res, err)
	return res, err
}

// recording leaves out of plan the actions a Record holds back.
func recording(plan Plan) Plan {
	out := plan
	out.Actions = slices.DeleteFunc(slices.Clone(plan.Actions), func(a Action) bool {
		return a.Kind == ActionRetire || a.Kind == ActionFinalize || a.Kind == ActionPrune
	})
	return out
}
