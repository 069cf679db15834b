package handoff_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// liveObject decodes a YAML manifest the way the dynamic client decodes a
// response: integers are int64, numbers with a fraction float64.
func liveObject(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	js, err := utilyaml.ToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return u
}

// pendingOn is r waiting on refs (Readiness.Pending).
func pendingOn(r handoff.Readiness, refs ...handoff.Ref) handoff.Readiness {
	r.Pending = refs
	return r
}

func rolloutNotReady(reason, msg string) handoff.Readiness {
	return handoff.Readiness{State: handoff.NotReady, Reason: reason, Message: msg}
}

func rolloutReady(msg string) handoff.Readiness {
	return handoff.Readiness{State: handoff.Ready, Reason: handoff.ReasonRolledOut, Message: msg}
}

func rolloutMalformed(msg string) handoff.Readiness {
	return handoff.Readiness{State: handoff.Unknown, Reason: handoff.ReasonMalformed, Message: msg}
}

const activator = "Deployment knative-serving/activator"

func TestRolloutDeployment(t *testing.T) {
	tests := map[string]struct {
		manifest string
		want     handoff.Readiness
	}{
		"every replica updated and available": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 3}
spec: {replicas: 2}
status:
  observedGeneration: 3
  replicas: 2
  updatedReplicas: 2
  readyReplicas: 2
  availableReplicas: 2
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable, message: ReplicaSet "activator-7d9f" has successfully progressed.}
`,
			want: rolloutReady(activator + ": rolled out"),
		},
		// knative/operator reads Available alone: with maxUnavailable 25% and
		// maxSurge 25%, Available stays True while one old replica still
		// serves.
		"mid rolling update with Available=True": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 4}
spec: {replicas: 2}
status:
  observedGeneration: 4
  replicas: 3
  updatedReplicas: 1
  readyReplicas: 2
  availableReplicas: 2
  unavailableReplicas: 1
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
  - {type: Progressing, status: "True", reason: ReplicaSetUpdated, message: ReplicaSet "activator-5c8b" is progressing.}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, activator+": 1 of 2 replicas updated"),
		},
		"observedGeneration behind generation": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 5}
spec: {replicas: 2}
status:
  observedGeneration: 4
  replicas: 2
  updatedReplicas: 2
  availableReplicas: 2
  conditions:
  - {type: Available, status: "True"}
`,
			want: rolloutNotReady(handoff.ReasonStale, activator+": status is for generation 4, spec is at 5"),
		},
		"status without observedGeneration": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 1}
status: {replicas: 1}
`,
			want: rolloutNotReady(handoff.ReasonStale, activator+": the controller has not observed generation 1 yet"),
		},
		"old replicas still present": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 4}
spec: {replicas: 2}
status:
  observedGeneration: 4
  replicas: 3
  updatedReplicas: 2
  availableReplicas: 2
  conditions:
  - {type: Available, status: "True"}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, activator+": 1 old replica pending termination"),
		},
		"updated replicas not all available": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 4}
spec: {replicas: 2}
status:
  observedGeneration: 4
  replicas: 2
  updatedReplicas: 2
  readyReplicas: 1
  availableReplicas: 1
  unavailableReplicas: 1
  conditions:
  - {type: Available, status: "True"}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, activator+": 1 of 2 updated replicas available"),
		},
		"more updated replicas than desired while scaling down": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 6}
spec: {replicas: 2}
status:
  observedGeneration: 6
  replicas: 3
  updatedReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True"}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, activator+": 3 updated replicas, 2 desired"),
		},
		"counts complete but no Available condition": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 2}
spec: {replicas: 1}
status: {observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, activator+": no Available condition yet"),
		},
		"counts complete but Available=False": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 2}
spec: {replicas: 1}
status:
  observedGeneration: 2
  replicas: 1
  updatedReplicas: 1
  availableReplicas: 1
  conditions:
  - {type: Available, status: "False", reason: MinimumReplicasUnavailable, message: Deployment does not have minimum availability.}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress,
				activator+": Available is False: MinimumReplicasUnavailable: Deployment does not have minimum availability."),
		},
		"progress deadline exceeded": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 7}
spec: {replicas: 2, progressDeadlineSeconds: 600}
status:
  observedGeneration: 7
  replicas: 3
  updatedReplicas: 1
  availableReplicas: 2
  unavailableReplicas: 1
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: ReplicaSet "activator-5c8b" has timed out progressing.}
`,
			want: rolloutNotReady(handoff.ReasonRolloutFailed,
				activator+`: progress deadline exceeded: ReplicaSet "activator-5c8b" has timed out progressing.`),
		},
		// The API server omits zero counts.
		"scaled to zero and observed": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 2}
spec: {replicas: 0}
status:
  observedGeneration: 2
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
`,
			want: rolloutReady(activator + ": rolled out"),
		},
		"scaled to zero, not observed yet": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 3}
spec: {replicas: 0}
status:
  observedGeneration: 2
  conditions:
  - {type: Available, status: "True"}
`,
			want: rolloutNotReady(handoff.ReasonStale, activator+": status is for generation 2, spec is at 3"),
		},
		"spec.replicas absent means one": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {}
status:
  observedGeneration: 1
  conditions:
  - {type: Available, status: "False"}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, activator+": 0 of 1 replicas updated"),
		},
		"paused": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 4}
spec: {replicas: 2, paused: true}
status:
  observedGeneration: 4
  replicas: 2
  availableReplicas: 2
  conditions:
  - {type: Available, status: "True"}
  - {type: Progressing, status: Unknown, reason: DeploymentPaused}
`,
			want: rolloutNotReady(handoff.ReasonRolloutPaused,
				activator+": paused (spec.paused is true); the rollout does not progress until it is resumed"),
		},
		"no status": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 2}
`,
			want: rolloutNotReady(handoff.ReasonNoStatus, activator+": no status yet"),
		},
		"updatedReplicas is a string": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, updatedReplicas: "2"}
`,
			want: rolloutMalformed(activator + ": .status.updatedReplicas accessor error: 2 is of the type string, expected int64"),
		},
		"spec.replicas has a fraction": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 1.5}
status: {observedGeneration: 1}
`,
			want: rolloutMalformed(activator + ": .spec.replicas accessor error: 1.5 is of the type float64, expected int64"),
		},
		"spec.paused is a string": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 1, paused: "yes"}
`,
			want: rolloutMalformed(activator + ": .spec.paused accessor error: yes is of the type string, expected bool"),
		},
		"conditions is a map": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 1}
status:
  observedGeneration: 1
  conditions: {Available: "True"}
`,
			want: rolloutMalformed(activator + ": .status.conditions accessor error: map[Available:True] is of the type map[string]interface {}, expected []interface{}"),
		},
		"a condition's status is a bool": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Available, status: true}
`,
			want: rolloutMalformed(activator + ": .status.conditions[0].status accessor error: true is of the type bool, expected string"),
		},
		"status is a string": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 1}
spec: {replicas: 1}
status: pending
`,
			want: rolloutMalformed(activator + ": .status accessor error: pending is of the type string, expected map[string]interface{}"),
		},
	}
	runRollout(t, tests)
}

func runRollout(t *testing.T, tests map[string]struct {
	manifest string
	want     handoff.Readiness
}) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := handoff.Rollout(liveObject(t, tc.manifest))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Rollout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRolloutStatefulSet(t *testing.T) {
	const web = "StatefulSet tekton-pipelines/web"
	tests := map[string]struct {
		manifest string
		want     handoff.Readiness
	}{
		"rolled out, partition 0": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 2}
spec:
  replicas: 3
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 0}}
status:
  observedGeneration: 2
  replicas: 3
  readyReplicas: 3
  availableReplicas: 3
  currentReplicas: 3
  updatedReplicas: 3
  currentRevision: web-7c4b2
  updateRevision: web-7c4b2
`,
			want: rolloutReady(web + ": rolled out"),
		},
		"update strategy defaulted, rolling update under way": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 3}
spec: {replicas: 3}
status:
  observedGeneration: 3
  replicas: 3
  readyReplicas: 2
  currentReplicas: 2
  updatedReplicas: 1
  currentRevision: web-6d8f9
  updateRevision: web-7c4b2
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, web+": 1 of 3 replicas updated"),
		},
		"all updated and ready, revisions not swapped yet": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 3}
spec:
  replicas: 3
  updateStrategy: {type: RollingUpdate}
status:
  observedGeneration: 3
  replicas: 3
  readyReplicas: 3
  updatedReplicas: 3
  currentRevision: web-6d8f9
  updateRevision: web-7c4b2
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, web+`: current revision "web-6d8f9" is not update revision "web-7c4b2" yet`),
		},
		"updated but not ready": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 3}
spec: {replicas: 3}
status:
  observedGeneration: 3
  replicas: 3
  readyReplicas: 2
  updatedReplicas: 3
  currentRevision: web-7c4b2
  updateRevision: web-7c4b2
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, web+": 2 of 3 replicas ready"),
		},
		// A canary: only ordinals >= partition move to the new revision, so
		// the revisions differ for good and the rollout is done.
		"partition 2, the one replica above it updated": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 4}
spec:
  replicas: 3
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 2}}
status:
  observedGeneration: 4
  replicas: 3
  readyReplicas: 3
  currentReplicas: 2
  updatedReplicas: 1
  currentRevision: web-6d8f9
  updateRevision: web-7c4b2
`,
			want: rolloutReady(web + ": rolled out"),
		},
		"partition 2, nothing updated yet": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 4}
spec:
  replicas: 3
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 2}}
status:
  observedGeneration: 4
  replicas: 3
  readyReplicas: 3
  currentReplicas: 3
  currentRevision: web-6d8f9
  updateRevision: web-7c4b2
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, web+": 0 of 1 replicas updated (partition 2)"),
		},
		"OnDelete, observed and ready, old pods kept": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 5}
spec:
  replicas: 3
  updateStrategy: {type: OnDelete}
status:
  observedGeneration: 5
  replicas: 3
  readyReplicas: 3
  currentReplicas: 3
  currentRevision: web-6d8f9
  updateRevision: web-7c4b2
`,
			want: rolloutReady(web + ": rolled out"),
		},
		"OnDelete, a pod not ready": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 5}
spec:
  replicas: 3
  updateStrategy: {type: OnDelete}
status: {observedGeneration: 5, replicas: 3, readyReplicas: 2}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, web+": 2 of 3 replicas ready"),
		},
		"observedGeneration behind": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 6}
spec: {replicas: 3}
status:
  observedGeneration: 5
  replicas: 3
  readyReplicas: 3
  updatedReplicas: 3
  currentRevision: web-7c4b2
  updateRevision: web-7c4b2
`,
			want: rolloutNotReady(handoff.ReasonStale, web+": status is for generation 5, spec is at 6"),
		},
		"partition is a string": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: tekton-pipelines, generation: 1}
spec:
  replicas: 3
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: "1"}}
status: {observedGeneration: 1}
`,
			want: rolloutMalformed(web + ": .spec.updateStrategy.rollingUpdate.partition accessor error: 1 is of the type string, expected int64"),
		},
	}
	runRollout(t, tests)
}

func TestRolloutDaemonSet(t *testing.T) {
	const proxy = "DaemonSet kube-system/kube-proxy"
	tests := map[string]struct {
		manifest string
		want     handoff.Readiness
	}{
		"every node runs an available updated pod": {
			manifest: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, generation: 2}
spec:
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
status:
  observedGeneration: 2
  currentNumberScheduled: 3
  desiredNumberScheduled: 3
  numberMisscheduled: 0
  numberReady: 3
  numberAvailable: 3
  updatedNumberScheduled: 3
`,
			want: rolloutReady(proxy + ": rolled out"),
		},
		"one of three nodes updated": {
			manifest: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, generation: 3}
spec: {}
status:
  observedGeneration: 3
  currentNumberScheduled: 3
  desiredNumberScheduled: 3
  numberMisscheduled: 0
  numberReady: 3
  numberAvailable: 3
  updatedNumberScheduled: 1
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, proxy+": 1 of 3 scheduled pods updated"),
		},
		"all updated, one not available": {
			manifest: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, generation: 3}
spec: {}
status:
  observedGeneration: 3
  currentNumberScheduled: 3
  desiredNumberScheduled: 3
  numberMisscheduled: 0
  numberReady: 2
  numberAvailable: 2
  numberUnavailable: 1
  updatedNumberScheduled: 3
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, proxy+": 2 of 3 scheduled pods available"),
		},
		"OnDelete, observed, nothing updated": {
			manifest: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, generation: 4}
spec:
  updateStrategy: {type: OnDelete}
status:
  observedGeneration: 4
  currentNumberScheduled: 3
  desiredNumberScheduled: 3
  numberMisscheduled: 0
  numberReady: 3
  numberAvailable: 3
`,
			want: rolloutReady(proxy + ": rolled out"),
		},
		"OnDelete, not observed": {
			manifest: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, generation: 5}
spec:
  updateStrategy: {type: OnDelete}
status: {observedGeneration: 4, currentNumberScheduled: 3, desiredNumberScheduled: 3, numberMisscheduled: 0, numberReady: 3}
`,
			want: rolloutNotReady(handoff.ReasonStale, proxy+": status is for generation 4, spec is at 5"),
		},
		"numberAvailable is a string": {
			manifest: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, generation: 1}
spec: {}
status: {observedGeneration: 1, desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: three}
`,
			want: rolloutMalformed(proxy + ": .status.numberAvailable accessor error: three is of the type string, expected int64"),
		},
	}
	runRollout(t, tests)
}

func TestRolloutJob(t *testing.T) {
	const migrate = "Job tekton-pipelines/storage-migration"
	tests := map[string]struct {
		manifest string
		want     handoff.Readiness
	}{
		"complete": {
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: storage-migration, namespace: tekton-pipelines, generation: 1}
spec: {backoffLimit: 6, completions: 1}
status:
  startTime: "2024-03-01T10:00:00Z"
  completionTime: "2024-03-01T10:00:42Z"
  succeeded: 1
  ready: 0
  conditions:
  - {type: Complete, status: "True", lastTransitionTime: "2024-03-01T10:00:42Z"}
`,
			want: rolloutReady(migrate + ": rolled out"),
		},
		"failed": {
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: storage-migration, namespace: tekton-pipelines, generation: 1}
spec: {backoffLimit: 6}
status:
  failed: 7
  conditions:
  - {type: Failed, status: "True", reason: BackoffLimitExceeded, message: Job has reached the specified backoff limit}
`,
			want: rolloutNotReady(handoff.ReasonRolloutFailed, migrate+": failed: BackoffLimitExceeded: Job has reached the specified backoff limit"),
		},
		"running": {
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: storage-migration, namespace: tekton-pipelines, generation: 1}
spec: {backoffLimit: 6}
status: {startTime: "2024-03-01T10:00:00Z", active: 1, failed: 2, ready: 1}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, migrate+": not complete (1 active, 0 succeeded, 2 failed)"),
		},
		"suspended": {
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: storage-migration, namespace: tekton-pipelines, generation: 2}
spec: {suspend: true}
status:
  conditions:
  - {type: Suspended, status: "True", reason: JobSuspended, message: Job suspended}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, migrate+": suspended"),
		},
		"just created": {
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: storage-migration, namespace: tekton-pipelines, generation: 1}
spec: {}
status: {}
`,
			want: rolloutNotReady(handoff.ReasonNoStatus, migrate+": no status yet"),
		},
		"a condition is a string": {
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: storage-migration, namespace: tekton-pipelines, generation: 1}
spec: {}
status:
  conditions: [Complete]
`,
			want: rolloutMalformed(migrate + ": .status.conditions[0] accessor error: Complete is of the type string, expected map[string]interface{}"),
		},
	}
	runRollout(t, tests)
}

func TestRolloutCRDAndAPIService(t *testing.T) {
	const tasks = "CustomResourceDefinition tasks.tekton.dev"
	const metrics = "APIService v1beta1.metrics.k8s.io"
	tests := map[string]struct {
		manifest string
		want     handoff.Readiness
	}{
		"CRD established": {
			manifest: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tasks.tekton.dev, generation: 2}
spec: {group: tekton.dev, names: {kind: Task, plural: tasks}, scope: Namespaced}
status:
  acceptedNames: {kind: Task, plural: tasks}
  storedVersions: [v1]
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts, message: no conflicts found}
  - {type: Established, status: "True", reason: InitialNamesAccepted, message: the initial names have been accepted}
`,
			want: rolloutReady(tasks + ": rolled out"),
		},
		"CRD names not accepted": {
			manifest: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tasks.tekton.dev, generation: 1}
spec: {group: tekton.dev, names: {kind: Task, plural: tasks, shortNames: [pr]}, scope: Namespaced}
status:
  acceptedNames: {kind: "", plural: ""}
  conditions:
  - {type: NamesAccepted, status: "False", reason: ShortNamesConflict, message: '"pr" is already in use'}
  - {type: Established, status: "False", reason: NotAccepted, message: not all names are accepted}
`,
			want: rolloutNotReady(handoff.ReasonRolloutFailed, tasks+`: names not accepted: ShortNamesConflict: "pr" is already in use`),
		},
		"CRD accepted, not established yet": {
			manifest: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tasks.tekton.dev, generation: 1}
spec: {group: tekton.dev, names: {kind: Task, plural: tasks}, scope: Namespaced}
status:
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts, message: no conflicts found}
  - {type: Established, status: "False", reason: Installing, message: the initial names have been accepted}
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, tasks+": Established is False: Installing: the initial names have been accepted"),
		},
		"CRD with no status": {
			manifest: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tasks.tekton.dev, generation: 1}
spec: {group: tekton.dev, names: {kind: Task, plural: tasks}, scope: Namespaced}
`,
			want: rolloutNotReady(handoff.ReasonNoStatus, tasks+": no status yet"),
		},
		"APIService available": {
			manifest: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io, generation: 1}
spec: {group: metrics.k8s.io, version: v1beta1, service: {name: metrics-server, namespace: kube-system}}
status:
  conditions:
  - {type: Available, status: "True", reason: Passed, message: all checks passed}
`,
			want: rolloutReady(metrics + ": rolled out"),
		},
		"APIService unavailable": {
			manifest: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io, generation: 1}
spec: {group: metrics.k8s.io, version: v1beta1, service: {name: metrics-server, namespace: kube-system}}
status:
  conditions:
  - type: Available
    status: "False"
    reason: MissingEndpoints
    message: endpoints for service/metrics-server in "kube-system" have no addresses with port name "https"
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress,
				metrics+`: Available is False: MissingEndpoints: endpoints for service/metrics-server in "kube-system" have no addresses with port name "https"`),
		},
		"APIService status with no Available condition": {
			manifest: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io, generation: 1}
spec: {group: metrics.k8s.io, version: v1beta1}
status:
  conditions: []
`,
			want: rolloutNotReady(handoff.ReasonRolloutInProgress, metrics+": no Available condition yet"),
		},
	}
	runRollout(t, tests)
}

func TestRolloutOtherKinds(t *testing.T) {
	tests := map[string]struct {
		manifest string
		want     handoff.Readiness
	}{
		"ConfigMap": {
			manifest: `
apiVersion: v1
kind: ConfigMap
metadata: {name: config-logging, namespace: knative-serving}
data: {loglevel.controller: info}
`,
			want: rolloutReady("ConfigMap knative-serving/config-logging: exists, no rollout to wait for"),
		},
		"ClusterRole": {
			manifest: `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: knative-serving-admin}
rules: []
`,
			want: rolloutReady("ClusterRole knative-serving-admin: exists, no rollout to wait for"),
		},
		// Rollout knows the kinds by group: a Deployment of another group is
		// none of its business, whatever its status says.
		"a Deployment kind of another group": {
			manifest: `
apiVersion: example.com/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 2}
status: {observedGeneration: 1}
`,
			want: rolloutReady(activator + ": exists, no rollout to wait for"),
		},
		"a custom resource with a Ready=False condition": {
			manifest: `
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: hello, namespace: default, generation: 1}
status:
  conditions:
  - {type: Ready, status: "False", reason: RevisionMissing}
`,
			want: rolloutReady("Service default/hello: exists, no rollout to wait for"),
		},
	}
	runRollout(t, tests)

	t.Run("nil", func(t *testing.T) {
		want := handoff.Readiness{State: handoff.Unknown, Reason: handoff.ReasonNoStatus, Message: "no object"}
		if diff := cmp.Diff(want, handoff.Rollout(nil)); diff != "" {
			t.Errorf("Rollout(nil) (-want +got):\n%s", diff)
		}
	})
}

func TestRolloutKindsAndReads(t *testing.T) {
	want := []schema.GroupKind{
		{Group: "apps", Kind: "Deployment"},
		{Group: "apps", Kind: "StatefulSet"},
		{Group: "apps", Kind: "DaemonSet"},
		{Group: "batch", Kind: "Job"},
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
		{Group: "apiregistration.k8s.io", Kind: "APIService"},
	}
	if diff := cmp.Diff(want, handoff.RolloutKinds()); diff != "" {
		t.Errorf("RolloutKinds (-want +got):\n%s", diff)
	}
	// Callers may change what they got without changing the next answer.
	handoff.RolloutKinds()[0].Kind = "Changed"
	if got := handoff.RolloutKinds()[0].Kind; got != "Deployment" {
		t.Errorf("RolloutKinds()[0].Kind = %q after a caller changed its copy, want Deployment", got)
	}

	reads := map[handoff.Ref]bool{
		{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "a"}:                          true,
		{Group: "apps", Kind: "StatefulSet", Namespace: "ns", Name: "a"}:                         true,
		{Group: "apps", Kind: "DaemonSet", Namespace: "ns", Name: "a"}:                           true,
		{Group: "batch", Kind: "Job", Namespace: "ns", Name: "a"}:                                true,
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "a.example.com"}: true,
		{Group: "apiregistration.k8s.io", Kind: "APIService", Name: "v1.example.com"}:            true,
		{Group: "apps", Kind: "ReplicaSet", Namespace: "ns", Name: "a"}:                          false,
		{Group: "batch", Kind: "CronJob", Namespace: "ns", Name: "a"}:                            false,
		{Group: "", Kind: "ConfigMap", Namespace: "ns", Name: "a"}:                               false,
		{Group: "", Kind: "Service", Namespace: "ns", Name: "a"}:                                 false,
		{Group: "example.com", Kind: "Deployment", Namespace: "ns", Name: "a"}:                   false,
		{Group: "extensions", Kind: "Deployment", Namespace: "ns", Name: "a"}:                    false,
	}
	for ref, want := range reads {
		if got := (handoff.RolloutProbe{}).Reads(ref); got != want {
			t.Errorf("Reads(%v) = %v, want %v", ref, got, want)
		}
	}
}

func TestRolloutProbeReady(t *testing.T) {
	set := liveObject(t, `
apiVersion: operator.example.com/v1alpha1
kind: InventorySet
metadata: {name: serving-core-v1-13, generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "True"}
`)
	want := rolloutNotReady(handoff.ReasonRolloutUnread,
		"the executor reads the objects set serving-core-v1-13 lists to tell whether they are rolled out")
	if diff := cmp.Diff(want, (handoff.RolloutProbe{}).Ready(set)); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
}

func TestRolloutProbeReadyFrom(t *testing.T) {
	const ns = "knative-serving"
	deploy := func(name string) handoff.Ref {
		return handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: ns, Name: name}
	}
	cm := handoff.Ref{Kind: "ConfigMap", Namespace: ns, Name: "config-logging"}
	svc := handoff.Ref{Kind: "Service", Namespace: ns, Name: "activator-service"}
	crd := handoff.Ref{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "services.serving.knative.dev"}
	job := handoff.Ref{Group: "batch", Kind: "Job", Namespace: ns, Name: "storage-version-migration"}
	sts := handoff.Ref{Group: "apps", Kind: "StatefulSet", Namespace: ns, Name: "redis"}

	done := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: knative-serving, generation: 2}
spec: {replicas: 1}
status:
  observedGeneration: 2
  replicas: 1
  updatedReplicas: 1
  availableReplicas: 1
  conditions:
  - {type: Available, status: "True"}
`
	rolling := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: knative-serving, generation: 3}
spec: {replicas: 2}
status:
  observedGeneration: 3
  replicas: 3
  updatedReplicas: 1
  availableReplicas: 2
  conditions:
  - {type: Available, status: "True"}
`
	established := `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: services.serving.knative.dev, generation: 1}
status:
  conditions:
  - {type: Established, status: "True"}
`
	stsRolling := `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: redis, namespace: knative-serving, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, readyReplicas: 3, updatedReplicas: 2, currentRevision: redis-1, updateRevision: redis-2}
`
	// named puts name where a manifest says NAME.
	named := func(manifest, name string) string { return strings.ReplaceAll(manifest, "NAME", name) }
	notFound := func(ref handoff.Ref) error {
		return apierrors.NewNotFound(schema.GroupResource{Group: ref.Group, Resource: "deployments"}, ref.Name)
	}

	tests := map[string]struct {
		resources []handoff.Ref
		// objects are the manifests live returns; errs the errors it
		// returns instead.
		objects map[handoff.Ref]string
		errs    map[handoff.Ref]error
		want    handoff.Readiness
		// calls are the refs live must be asked about, in order.
		calls []handoff.Ref
		probe handoff.RolloutProbe
	}{
		"all rolled out; ConfigMap and Service not read": {
			resources: []handoff.Ref{cm, crd, svc, deploy("activator"), deploy("autoscaler")},
			objects: map[handoff.Ref]string{
				crd:                  established,
				deploy("activator"):  named(done, "activator"),
				deploy("autoscaler"): named(done, "autoscaler"),
			},
			want:  rolloutReady("3 workloads rolled out"),
			calls: []handoff.Ref{crd, deploy("activator"), deploy("autoscaler")},
		},
		"one workload": {
			resources: []handoff.Ref{cm, deploy("activator")},
			objects:   map[handoff.Ref]string{deploy("activator"): named(done, "activator")},
			want:      rolloutReady("1 workload rolled out"),
			calls:     []handoff.Ref{deploy("activator")},
		},
		"nothing to read": {
			resources: []handoff.Ref{cm, svc},
			want:      rolloutReady("0 workloads rolled out"),
		},
		"the first listed not rolled out is named, the others counted": {
			resources: []handoff.Ref{cm, deploy("activator"), deploy("autoscaler"), sts, deploy("controller"), job},
			objects: map[handoff.Ref]string{
				deploy("activator"):  named(done, "activator"),
				deploy("autoscaler"): named(rolling, "autoscaler"),
				sts:                  stsRolling,
				deploy("controller"): named(done, "controller"),
			},
			errs: map[handoff.Ref]error{job: notFound(job)},
			want: pendingOn(rolloutNotReady(handoff.ReasonRolloutInProgress,
				"Deployment knative-serving/autoscaler: 1 of 2 replicas updated (and 2 more)"), deploy("autoscaler"), sts, job),
			calls: []handoff.Ref{deploy("activator"), deploy("autoscaler"), sts, deploy("controller"), job},
		},
		"listed order decides, not the kind": {
			resources: []handoff.Ref{sts, deploy("autoscaler")},
			objects: map[handoff.Ref]string{
				sts:                  stsRolling,
				deploy("autoscaler"): named(rolling, "autoscaler"),
			},
			want:  pendingOn(rolloutNotReady(handoff.ReasonRolloutInProgress, "StatefulSet knative-serving/redis: 2 of 3 replicas updated (and 1 more)"), sts, deploy("autoscaler")),
			calls: []handoff.Ref{sts, deploy("autoscaler")},
		},
		"a skipped kind is neither read nor waited for": {
			probe:     handoff.RolloutProbe{Skip: []schema.GroupKind{{Group: "batch", Kind: "Job"}}},
			resources: []handoff.Ref{deploy("activator"), job},
			objects:   map[handoff.Ref]string{deploy("activator"): named(done, "activator")},
			errs:      map[handoff.Ref]error{job: notFound(job)},
			want:      rolloutReady("1 workload rolled out"),
			calls:     []handoff.Ref{deploy("activator")},
		},
		"missing object": {
			resources: []handoff.Ref{deploy("activator"), deploy("webhook")},
			objects:   map[handoff.Ref]string{deploy("activator"): named(done, "activator")},
			errs:      map[handoff.Ref]error{deploy("webhook"): notFound(deploy("webhook"))},
			want:      pendingOn(rolloutNotReady(handoff.ReasonRolloutMissing, "Deployment knative-serving/webhook: not created yet"), deploy("webhook")),
			calls:     []handoff.Ref{deploy("activator"), deploy("webhook")},
		},
		"missing cluster-scoped object": {
			resources: []handoff.Ref{crd},
			errs:      map[handoff.Ref]error{crd: notFound(crd)},
			want:      pendingOn(rolloutNotReady(handoff.ReasonRolloutMissing, "CustomResourceDefinition services.serving.knative.dev: not created yet"), crd),
			calls:     []handoff.Ref{crd},
		},
		"read error": {
			resources: []handoff.Ref{deploy("activator")},
			errs:      map[handoff.Ref]error{deploy("activator"): errors.New("connection refused")},
			want: handoff.Readiness{State: handoff.Unknown, Reason: handoff.ReasonRolloutReadError,
				Message: "Deployment knative-serving/activator: connection refused", Pending: []handoff.Ref{deploy("activator")}},
			calls: []handoff.Ref{deploy("activator")},
		},
		"no object and no error": {
			resources: []handoff.Ref{deploy("activator")},
			want: handoff.Readiness{State: handoff.Unknown, Reason: handoff.ReasonRolloutReadError,
				Message: "Deployment knative-serving/activator: read returned no object", Pending: []handoff.Ref{deploy("activator")}},
			calls: []handoff.Ref{deploy("activator")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var calls []handoff.Ref
			live := func(ref handoff.Ref) (*unstructured.Unstructured, error) {
				switch ref.Kind {
				case "ConfigMap", "Service":
					t.Errorf("live(%v) called for a kind with no rollout", ref)
				}
				calls = append(calls, ref)
				if err := tc.errs[ref]; err != nil {
					return nil, err
				}
				if m, ok := tc.objects[ref]; ok {
					return liveObject(t, m), nil
				}
				return nil, nil
			}
			set := handoff.Set{Name: "serving-core-v1-13", Resources: tc.resources}
			got := tc.probe.ReadyFrom(set, live)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadyFrom (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.calls, calls); diff != "" {
				t.Errorf("live calls (-want +got):\n%s", diff)
			}
		})
	}
}

// With Stamped, a Deployment whose status is rolled out counts for a set
// only once it was written for that set: in place, the old generation's
// Deployment is the same object, rolled out at the old spec.
func TestRolloutProbeStamped(t *testing.T) {
	dep := liveObject(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving, generation: 2}
spec: {replicas: 1}
status:
  observedGeneration: 2
  replicas: 1
  updatedReplicas: 1
  availableReplicas: 1
  conditions:
  - {type: Available, status: "True"}
`)
	ref := handoff.RefOf(dep)
	v1 := handoff.Set{Name: "serving-inventory-part-0-aaaa", UID: "uid-v1", Resources: []handoff.Ref{ref}}
	v2 := handoff.Set{Name: "serving-inventory-part-0-bbbb", UID: "uid-v2", Resources: []handoff.Ref{ref}}
	handoff.NewGuard(v1, []handoff.Set{v1, v2}).Stamp(dep)
	live := func(handoff.Ref) (*unstructured.Unstructured, error) { return dep, nil }

	if got := (handoff.RolloutProbe{}).ReadyFrom(v2, live); got.State != handoff.Ready {
		t.Errorf("unstamped probe: %v, want Ready (status alone)", got)
	}
	want := pendingOn(rolloutNotReady(handoff.ReasonRolloutNotApplied, activator+": not applied for serving-inventory-part-0-bbbb yet (last written by set uid-v1)"), ref)
	if d := cmp.Diff(want, (handoff.RolloutProbe{Stamped: true}).ReadyFrom(v2, live)); d != "" {
		t.Errorf("v2 before its apply (-want +got):\n%s", d)
	}
	if got := (handoff.RolloutProbe{Stamped: true}).ReadyFrom(v1, live); got.State != handoff.Ready {
		t.Errorf("v1, which wrote it: %v, want Ready", got)
	}
	dep.SetAnnotations(nil)
	want = pendingOn(rolloutNotReady(handoff.ReasonRolloutNotApplied, activator+": not applied for serving-inventory-part-0-bbbb yet (last written by nobody)"), ref)
	if d := cmp.Diff(want, (handoff.RolloutProbe{Stamped: true}).ReadyFrom(v2, live)); d != "" {
		t.Errorf("no stamp (-want +got):\n%s", d)
	}
	handoff.NewGuard(v2, []handoff.Set{v1, v2}).Stamp(dep)
	if got := (handoff.RolloutProbe{Stamped: true}).ReadyFrom(v2, live); got.State != handoff.Ready {
		t.Errorf("v2 after its apply: %v, want Ready", got)
	}
}
