package handofftest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// fromYAML decodes a manifest as the dynamic client decodes a response.
func fromYAML(t *testing.T, manifest string) *unstructured.Unstructured {
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

// wantedStatus decodes a status written in YAML, its integers int64 as in a
// stored object.
func wantedStatus(t *testing.T, manifest string) map[string]any {
	t.Helper()
	js, err := utilyaml.ToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(js, &m); err != nil {
		t.Fatalf("status: %v", err)
	}
	return m
}

// clientOf returns actor's client of obj's resource on c.
func clientOf(t *testing.T, c *handofftest.Cluster, actor string, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	m, err := c.Mapper().RESTMapping(obj.GroupVersionKind().GroupKind())
	if err != nil {
		t.Fatal(err)
	}
	ri := c.ClientFor(actor).Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return ri.Namespace(obj.GetNamespace())
	}
	return ri
}

// probed is what handoff.RolloutProbe says of a set listing obj alone,
// as the executor reads it, from the cluster.
func probed(c *handofftest.Cluster, obj *unstructured.Unstructured) handoff.Readiness {
	set := handoff.Set{Name: "inventory", Resources: []handoff.Ref{handoff.RefOf(obj)}}
	return handoff.RolloutProbe{}.ReadyFrom(set, func(ref handoff.Ref) (*unstructured.Unstructured, error) {
		o, ok := c.Get(handofftest.Key{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name})
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: ref.Group, Resource: ref.Kind}, ref.Name)
		}
		return o, nil
	})
}

// Each kind, driven through handoff.RolloutProbe: no status, then a
// rollout under way (Passes 2), then the exact status the kind's
// controller writes when done, which the probe reads as rolled out; for
// the kinds with observedGeneration, again after a change of spec.
func TestRolloutsEachKind(t *testing.T) {
	tests := map[string]struct {
		manifest string
		actor    string
		// under is the message of the probe's RolloutInProgress after the
		// first of two passes.
		under string
		// status is the whole status written by the second.
		status string
		// change, if set, is a spec change (a merge patch); status2 the
		// status after two more passes.
		change, status2 string
	}{
		"Deployment of 3 replicas": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: activator, namespace: knative-serving}
spec: {replicas: 3, template: {metadata: {annotations: {release: v1}}}}`,
			actor: handofftest.DeploymentControllerActor,
			under: "Deployment knative-serving/activator: 0 of 3 updated replicas available",
			status: `
observedGeneration: 1
replicas: 3
updatedReplicas: 3
readyReplicas: 3
availableReplicas: 3
conditions:
- {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
- {type: Progressing, status: "True", reason: NewReplicaSetAvailable, message: ReplicaSet "activator" has successfully progressed.}`,
			change: `{"spec":{"replicas":2,"template":{"metadata":{"annotations":{"release":"v2"}}}}}`,
			status2: `
observedGeneration: 2
replicas: 2
updatedReplicas: 2
readyReplicas: 2
availableReplicas: 2
conditions:
- {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
- {type: Progressing, status: "True", reason: NewReplicaSetAvailable, message: ReplicaSet "activator" has successfully progressed.}`,
		},
		"Deployment without spec.replicas": {
			manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: webhook, namespace: knative-serving}
spec: {}`,
			actor: handofftest.DeploymentControllerActor,
			under: "Deployment knative-serving/webhook: 0 of 1 updated replicas available",
			status: `
observedGeneration: 1
replicas: 1
updatedReplicas: 1
readyReplicas: 1
availableReplicas: 1
conditions:
- {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
- {type: Progressing, status: "True", reason: NewReplicaSetAvailable, message: ReplicaSet "webhook" has successfully progressed.}`,
		},
		"StatefulSet of 3 replicas": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec: {replicas: 3, template: {metadata: {annotations: {release: v1}}}}`,
			actor: handofftest.StatefulSetControllerActor,
			under: "StatefulSet data/db: 0 of 3 replicas updated",
			status: `
observedGeneration: 1
replicas: 3
readyReplicas: 3
availableReplicas: 3
currentReplicas: 3
updatedReplicas: 3
currentRevision: db-1
updateRevision: db-1`,
			change: `{"spec":{"template":{"metadata":{"annotations":{"release":"v2"}}}}}`,
			status2: `
observedGeneration: 2
replicas: 3
readyReplicas: 3
availableReplicas: 3
currentReplicas: 3
updatedReplicas: 3
currentRevision: db-2
updateRevision: db-2`,
		},
		"StatefulSet with a partition": {
			manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec: {replicas: 3, updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 1}}}`,
			actor: handofftest.StatefulSetControllerActor,
			under: "StatefulSet data/db: 0 of 2 replicas updated (partition 1)",
			status: `
observedGeneration: 1
replicas: 3
readyReplicas: 3
availableReplicas: 3
currentReplicas: 3
updatedReplicas: 2
currentRevision: db-1
updateRevision: db-1`,
			// The replica below the partition stays at the current revision.
			change: `{"spec":{"template":{"metadata":{"annotations":{"release":"v2"}}}}}`,
			status2: `
observedGeneration: 2
replicas: 3
readyReplicas: 3
availableReplicas: 3
currentReplicas: 1
updatedReplicas: 2
currentRevision: db-1
updateRevision: db-2`,
		},
		"DaemonSet": {
			manifest: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system}
spec: {template: {metadata: {annotations: {release: v1}}}}`,
			actor: handofftest.DaemonSetControllerActor,
			under: "DaemonSet kube-system/kube-proxy: 0 of 1 scheduled pods updated",
			status: `
observedGeneration: 1
desiredNumberScheduled: 1
currentNumberScheduled: 1
numberMisscheduled: 0
updatedNumberScheduled: 1
numberReady: 1
numberAvailable: 1`,
			change: `{"spec":{"template":{"metadata":{"annotations":{"release":"v2"}}}}}`,
			status2: `
observedGeneration: 2
desiredNumberScheduled: 1
currentNumberScheduled: 1
numberMisscheduled: 0
updatedNumberScheduled: 1
numberReady: 1
numberAvailable: 1`,
		},
		"Job of 2 completions": {
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: storage-migration, namespace: tekton-pipelines}
spec: {completions: 2}`,
			actor: handofftest.JobControllerActor,
			under: "Job tekton-pipelines/storage-migration: not complete (1 active, 0 succeeded, 0 failed)",
			// The fake clock: the create is at 00:00:01, the first pass's
			// write at 00:00:02.
			status: `
active: 0
succeeded: 2
startTime: "2025-01-01T00:00:01Z"
completionTime: "2025-01-01T00:00:02Z"
conditions:
- {type: Complete, status: "True", reason: CompletionsReached, message: Reached expected number of succeeded pods}`,
		},
		"CustomResourceDefinition": {
			manifest: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.dev}
spec:
  group: example.dev
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - {name: v1alpha1, served: true, storage: false}
  - {name: v1, served: true, storage: true}`,
			actor: handofftest.CRDControllerActor,
			under: "CustomResourceDefinition widgets.example.dev: Established is False: Installing: the initial names have been accepted",
			status: `
acceptedNames: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
storedVersions: [v1]
conditions:
- {type: NamesAccepted, status: "True", reason: NoConflicts, message: no conflicts found}
- {type: Established, status: "True", reason: InitialNamesAccepted, message: the initial names have been accepted}`,
		},
		"APIService": {
			manifest: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.custom.metrics.k8s.io}
spec: {group: custom.metrics.k8s.io, version: v1beta1, service: {name: metrics, namespace: monitoring}}`,
			actor: handofftest.APIServiceControllerActor,
			under: "APIService v1beta1.custom.metrics.k8s.io: Available is False: MissingEndpoints: endpoints for the service have no addresses yet",
			status: `
conditions:
- {type: Available, status: "True", reason: Passed, message: all checks passed}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := handofftest.NewCluster()
			obj := fromYAML(t, tc.manifest)
			key := handofftest.KeyOf(obj)
			ri := clientOf(t, c, "operator", obj)
			if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := probed(c, obj); got.Reason != handoff.ReasonNoStatus {
				t.Fatalf("before any pass: %v, want %s", got, handoff.ReasonNoStatus)
			}
			r := &handofftest.Rollouts{Passes: 2}
			pass := func(wantDone bool, wantStatus string) {
				t.Helper()
				writes := len(c.Writes())
				done, err := r.RollOut(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				var want []handofftest.Key
				if wantDone {
					want = []handofftest.Key{key}
				}
				if d := cmp.Diff(want, done); d != "" {
					t.Errorf("rolled out (-want +got):\n%s", d)
				}
				ws := c.WritesSince(writes)
				if len(ws) != 1 || ws[0].Actor != tc.actor || ws[0].Subresource != "status" || ws[0].Key != key {
					t.Fatalf("writes of the pass: %v, want one status write of %s by %s", ws, key, tc.actor)
				}
				if wantStatus == "" {
					return
				}
				live, _ := c.Get(key)
				if d := cmp.Diff(wantedStatus(t, wantStatus), live.Object["status"]); d != "" {
					t.Errorf("status (-want +got):\n%s", d)
				}
			}
			pass(false, "")
			if got := probed(c, obj); got.State != handoff.NotReady || got.Reason != handoff.ReasonRolloutInProgress || got.Message != tc.under {
				t.Errorf("after the first pass: %+v, want NotReady %s %q", got, handoff.ReasonRolloutInProgress, tc.under)
			}
			pass(true, tc.status)
			if got := probed(c, obj); got.State != handoff.Ready {
				t.Errorf("after the second pass: %v, want Ready", got)
			}
			// A pass with nothing to do writes nothing.
			writes := len(c.Writes())
			if done, err := r.RollOut(ctx, c); err != nil || len(done) != 0 || len(c.Writes()) != writes {
				t.Errorf("a third pass: rolled out %v, error %v, %d writes; want nothing", done, err, len(c.Writes())-writes)
			}
			if tc.change == "" {
				return
			}
			if _, err := ri.Patch(ctx, obj.GetName(), types.MergePatchType, []byte(tc.change), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := probed(c, obj); got.Reason != handoff.ReasonStale {
				t.Errorf("after the change: %v, want %s", got, handoff.ReasonStale)
			}
			pass(false, "")
			if got := probed(c, obj); got.Reason != handoff.ReasonRolloutInProgress {
				t.Errorf("after the change and a pass: %v, want %s", got, handoff.ReasonRolloutInProgress)
			}
			pass(true, tc.status2)
			if got := probed(c, obj); got.State != handoff.Ready {
				t.Errorf("after the change and two passes: %v, want Ready", got)
			}
		})
	}
}

func deployment(name string) *unstructured.Unstructured {
	return handofftest.Object("apps/v1", "Deployment", "ns", name, nil, map[string]any{"spec": map[string]any{"replicas": int64(1)}})
}

// Hold keeps a rollout back for as long as it says so, and a held pass
// does not count towards Passes; the zero Rollouts (Cluster.RollOut) rolls
// out in one pass.
func TestRolloutsHold(t *testing.T) {
	ctx := context.Background()
	c := handofftest.NewCluster()
	for _, name := range []string{"a", "b"} {
		if _, err := clientOf(t, c, "operator", deployment(name)).Create(ctx, deployment(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	held := true
	var asked []string
	r := &handofftest.Rollouts{Passes: 2, Hold: func(obj *unstructured.Unstructured) bool {
		asked = append(asked, obj.GetName())
		return held && obj.GetName() == "b"
	}}
	for i := 0; i < 3; i++ {
		if _, err := r.RollOut(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if got := probed(c, deployment("a")); got.State != handoff.Ready {
		t.Errorf("a after 3 passes: %v", got)
	}
	if got := probed(c, deployment("b")); got.Reason != handoff.ReasonNoStatus {
		t.Errorf("b, held, after 3 passes: %v, want %s", got, handoff.ReasonNoStatus)
	}
	if d := cmp.Diff([]string{"a", "b", "a", "b", "a", "b"}, asked); d != "" {
		t.Errorf("Hold asked about (-want +got):\n%s", d)
	}
	held = false
	done, err := r.RollOut(ctx, c)
	if err != nil || len(done) != 0 {
		t.Fatalf("first pass after the hold: rolled out %v, error %v; want none (Passes 2)", done, err)
	}
	done, err = r.RollOut(ctx, c)
	if err != nil || len(done) != 1 || done[0].Name != "b" {
		t.Fatalf("second pass after the hold: rolled out %v, error %v; want b", done, err)
	}

	// The zero Rollouts: one pass.
	if _, err := clientOf(t, c, "operator", deployment("c")).Create(ctx, deployment("c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done, err = c.RollOut(ctx)
	if err != nil || len(done) != 1 || done[0].Name != "c" {
		t.Fatalf("Cluster.RollOut: rolled out %v, error %v; want c alone", done, err)
	}
	if got := probed(c, deployment("c")); got.State != handoff.Ready {
		t.Errorf("c after Cluster.RollOut: %v", got)
	}
}

// What a controller does not roll out is left as it is: a paused
// Deployment, a suspended Job, an object being deleted, a kind with no
// rollout.
func TestRolloutsLeaves(t *testing.T) {
	ctx := context.Background()
	c := handofftest.NewCluster()
	paused := handofftest.Object("apps/v1", "Deployment", "ns", "paused", nil, map[string]any{"spec": map[string]any{"paused": true}})
	suspended := handofftest.Object("batch/v1", "Job", "ns", "suspended", nil, map[string]any{"spec": map[string]any{"suspend": true}})
	deleting := handofftest.Object("apps/v1", "StatefulSet", "ns", "deleting", nil, nil)
	deleting.SetFinalizers([]string{"example.dev/hold"})
	cm := handofftest.Object("v1", "ConfigMap", "ns", "config", nil, nil)
	for _, o := range []*unstructured.Unstructured{paused, suspended, deleting, cm} {
		if _, err := clientOf(t, c, "operator", o).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := clientOf(t, c, "operator", deleting).Delete(ctx, "deleting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	writes := len(c.Writes())
	done, err := c.RollOut(ctx)
	if err != nil || len(done) != 0 {
		t.Fatalf("rolled out %v, error %v; want nothing", done, err)
	}
	if ws := c.WritesSince(writes); len(ws) != 0 {
		t.Errorf("writes: %v, want none", ws)
	}
}

// A status write that fails is returned, naming the object, and does not
// stop the pass; the next pass writes it.
func TestRolloutsFault(t *testing.T) {
	ctx := context.Background()
	c := handofftest.NewCluster()
	for _, name := range []string{"a", "b"} {
		if _, err := clientOf(t, c, "operator", deployment(name)).Create(ctx, deployment(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lost := apierrors.NewServiceUnavailable("etcd is away")
	c.InjectFaults(handofftest.FailNth(1, handofftest.BeforeCommit, lost), handofftest.DeploymentControllerActor)
	done, err := c.RollOut(ctx)
	if !errors.Is(err, lost) || !strings.Contains(err.Error(), "apps/Deployment ns/a: ") {
		t.Errorf("error %v, want %v for apps/Deployment ns/a", err, lost)
	}
	if len(done) != 1 || done[0].Name != "b" {
		t.Errorf("rolled out %v, want b", done)
	}
	c.DisableFaults()
	if done, err := c.RollOut(ctx); err != nil || len(done) != 1 || done[0].Name != "a" {
		t.Errorf("the next pass rolled out %v, error %v; want a", done, err)
	}
}
