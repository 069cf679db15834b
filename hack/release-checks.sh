#!/usr/bin/env bash
# The checks of .ci/run at full size, for a maintainer to run before a
# release (hours on 2 cores): .ci/run first, then what CI runs smaller:
#
#   - the model-based test over 10 000 walks (CI: 3 000) and the inventory
#     walks over 2 000 (CI: 500);
#   - each fuzzer for 5 minutes (CI: 15 s);
#   - tektoncd/operator's patch commit by commit (run.sh -series), every
#     e2e scenario with 16 stops of the interrupted upgrade (CI: 5
#     scenarios, 2 stops), and the same scenarios unpatched, for the
#     integration README's tables;
#   - knative/operator's suites before the patch too (run.sh without
#     -quick), every e2e scenario (CI: 4), and unpatched;
#   - the scale benchmark at 100, 1 000 and 5 000 resources, every flow,
#     unthrottled and at QPS 5 (CI: 1 000 unthrottled and 100 throttled,
#     one flow beside legacy).
#
# Usage: bash hack/release-checks.sh [-skip-ci]
#   -skip-ci  leave out .ci/run (when it has just passed on this commit)
# Each part prints its time; the run stops at the first failure. The
# unpatched e2e runs measure, they do not assert: their tables go in the
# integrations' READMEs.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=-mod=readonly

part_name= part_start= start=$(date +%s)
part() {
	local now
	now=$(date +%s)
	[ -z "$part_name" ] || echo "   ($part_name: $((now - part_start))s)"
	part_name=${1:-} part_start=$now
	[ -z "$part_name" ] || echo "== $part_name"
}

if [ "${1:-}" != "-skip-ci" ]; then
	part ".ci/run"
	bash .ci/run
fi

part "model-based test: 10 000 walks"
go test -count=1 -run '^TestModel$' -model.seeds 10000 -timeout 60m -v . 2>&1 \
	| grep -E '^(--- |ok|FAIL|PASS)|model: |broken|seed [0-9]+:|^ +[0-9]+\. |world:'

part "inventory walks: 2 000"
go test -count=1 ./inventory/ -run '^TestInventoryWalks$' -inventory.walks=2000 -timeout 60m -v 2>&1 \
	| grep -E '^(--- |ok|FAIL|PASS)|walks of|seed [0-9]+:|^ +[0-9]+\. '

part "fuzz, 5 minutes each"
go test -run '^$' -fuzz '^FuzzPlan$' -fuzztime 5m .
go test -run '^$' -fuzz '^FuzzFinalization$' -fuzztime 5m .

part "tektoncd/operator: the suites before and after, the series commit by commit"
bash integrations/tektoncd-operator/run.sh
bash integrations/tektoncd-operator/run.sh -series

part "tektoncd/operator: every e2e scenario, patched (16 stops) and unpatched"
bash integrations/tektoncd-operator/e2e.sh
bash integrations/tektoncd-operator/e2e.sh -unpatched

part "knative/operator: versions, the suites before and after"
bash integrations/knative-operator/versions.sh
bash integrations/knative-operator/run.sh

part "knative/operator: every e2e scenario, patched and unpatched"
bash integrations/knative-operator/e2e.sh
bash integrations/knative-operator/e2e.sh -unpatched

part "scale: 100, 1 000 and 5 000 resources, every flow, unthrottled and at QPS 5"
HANDOFF_SCALE_SIZES=100,1000,5000 E2E_PKGS=./e2e/ bash hack/e2e.sh -race=false -run '^$' -bench '^BenchmarkScale$' -benchtime 1x -timeout 240m -v

part
echo "== ok ($(($(date +%s) - start))s)"
