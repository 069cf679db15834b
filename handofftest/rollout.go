package handofftest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Actors of the controllers [Rollouts] plays, one per kind, as named in
// a real cluster. They appear in [Write.Actor], and faults can be
// injected into their calls ([Cluster.InjectFaults]).
const (
	// DeploymentControllerActor writes the status of Deployments.
	DeploymentControllerActor = "deployment-controller"
	// StatefulSetControllerActor writes the status of StatefulSets.
	StatefulSetControllerActor = "statefulset-controller"
	// DaemonSetControllerActor writes the status of DaemonSets.
	DaemonSetControllerActor = "daemonset-controller"
	// JobControllerActor writes the status of Jobs.
	JobControllerActor = "job-controller"
	// CRDControllerActor, the apiextensions-apiserver's naming and
	// establishing controllers, writes the status of
	// CustomResourceDefinitions.
	CRDControllerActor = "apiextensions-apiserver"
	// APIServiceControllerActor, kube-aggregator's availability
	// controller, writes the status of APIServices.
	APIServiceControllerActor = "kube-aggregator"
)

// Rollouts plays the controllers that roll out what handoff.RolloutProbe
// waits for, on a [Cluster] that has no kubelets and no controllers:
// the deployment, statefulset, daemonset and job controllers, the
// apiextensions-apiserver, which establishes CustomResourceDefinitions,
// and kube-aggregator, which finds APIServices available. Each
// [Rollouts.RollOut] is one pass of them all; between passes the objects
// stay as they are, so a test decides when a rollout happens.
//
// A pass reads the stored objects, as a controller reads its informer's
// cache, and writes each one's status through the status subresource as
// its controller's actor ([DeploymentControllerActor], …), only when the
// status changes. What it writes, by kind, is what handoff.Rollout reads
// as rolled out for the object's current spec:
//
//   - Deployment: status.observedGeneration = metadata.generation;
//     replicas, updatedReplicas, readyReplicas and availableReplicas =
//     spec.replicas (1 when absent); Available=True
//     (MinimumReplicasAvailable) and Progressing=True
//     (NewReplicaSetAvailable). A paused Deployment is left as it is.
//   - StatefulSet: observedGeneration; replicas, readyReplicas,
//     currentReplicas, availableReplicas = spec.replicas; updatedReplicas
//     the same less a RollingUpdate partition; updateRevision
//     "<name>-<generation>", and currentRevision the same unless a
//     partition holds replicas back (then the revision it had).
//   - DaemonSet: one node: observedGeneration; desiredNumberScheduled,
//     currentNumberScheduled, updatedNumberScheduled, numberReady and
//     numberAvailable 1, numberMisscheduled 0.
//   - Job: succeeded = spec.completions (1 when absent), active 0,
//     startTime and completionTime, Complete=True. A suspended Job
//     (spec.suspend) is left as it is.
//   - CustomResourceDefinition: acceptedNames = spec.names,
//     storedVersions the storage version of spec.versions,
//     NamesAccepted=True and Established=True.
//   - APIService: Available=True (Passed).
//
// With Passes above 1, the passes before the last one for a generation
// write a status of a rollout under way, which handoff.Rollout reads as
// NotReady, RolloutInProgress: a Deployment's new replicas not yet
// available (Available=False), a StatefulSet's or DaemonSet's not yet
// updated, a Job active, a CRD's names accepted but Established=False, an
// APIService Available=False (MissingEndpoints). Objects being deleted
// are left alone, and so are those Hold holds.
//
// The zero Rollouts rolls out every object it finds in one pass. A
// Rollouts is safe for concurrent use; it remembers how many passes each
// object's generation has had.
type Rollouts struct {
	// Hold, if set, is asked about every object of those kinds a pass
	// visits, in the order of their keys, not being deleted, with a copy
	// of it; true leaves it as it is in this pass: its status stays what
	// was last written, so a spec changed since reads as stale
	// (observedGeneration behind), and the pass does not count towards
	// Passes. A rollout that never happens is a Hold that always says
	// true for it; one that happens later, a Hold that says true until
	// then.
	Hold func(obj *unstructured.Unstructured) bool
	// Passes is how many passes an object's rollout takes, counted for
	// each generation of it (a changed spec starts again): the last
	// writes the rolled-out status, the ones before it a status of a
	// rollout under way. Zero means 1.
	Passes int

	mu   sync.Mutex
	seen map[types.UID]passes
}

// passes counts the passes over one generation of an object.
type passes struct {
	generation int64
	n          int
}

// rolloutController is what Rollouts does for one kind.
type rolloutController struct {
	actor string
	// skip reports objects the controller does not roll out.
	skip func(obj *unstructured.Unstructured) bool
	// status returns the status to write: rolled out when done, else
	// under way.
	status func(obj *unstructured.Unstructured, done bool, now time.Time) (map[string]any, error)
}

var rolloutControllers = map[schema.GroupKind]rolloutController{
	{Group: "apps", Kind: "Deployment"}: {
		actor: DeploymentControllerActor,
		skip: func(obj *unstructured.Unstructured) bool {
			paused, _, _ := unstructured.NestedBool(obj.Object, "spec", "paused")
			return paused
		},
		status: deploymentStatus,
	},
	{Group: "apps", Kind: "StatefulSet"}:                              {actor: StatefulSetControllerActor, status: statefulSetStatus},
	{Group: "apps", Kind: "DaemonSet"}:                                {actor: DaemonSetControllerActor, status: daemonSetStatus},
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: {actor: CRDControllerActor, status: crdStatus},
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:             {actor: APIServiceControllerActor, status: apiServiceStatus},
	{Group: "batch", Kind: "Job"}: {
		actor: JobControllerActor,
		skip: func(obj *unstructured.Unstructured) bool {
			suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend")
			return suspended
		},
		status: jobStatus,
	},
}

// RollOut is one pass of the zero [Rollouts] over the cluster: every
// Deployment, StatefulSet, DaemonSet, Job, CustomResourceDefinition and
// APIService stored is rolled out for its current spec.
func (c *Cluster) RollOut(ctx context.Context) ([]Key, error) {
	var r Rollouts
	return r.RollOut(ctx, c)
}

// RollOut runs one pass of the controllers over c (see [Rollouts]). It
// returns the keys of the objects this pass wrote a rolled-out status
// for, in order. A write that fails does not stop the pass: the errors
// are returned joined, each naming its object.
func (r *Rollouts) RollOut(ctx context.Context, c *Cluster) ([]Key, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[types.UID]passes{}
	}
	var done []Key
	var errs []error
	for _, obj := range c.Objects() {
		gk := obj.GroupVersionKind().GroupKind()
		ctl, ok := rolloutControllers[gk]
		if !ok || obj.GetDeletionTimestamp() != nil {
			continue
		}
		if r.Hold != nil && r.Hold(obj.DeepCopy()) {
			continue
		}
		if ctl.skip != nil && ctl.skip(obj) {
			continue
		}
		p := r.seen[obj.GetUID()]
		if p.generation != obj.GetGeneration() {
			p = passes{generation: obj.GetGeneration()}
		}
		p.n++
		r.seen[obj.GetUID()] = p
		finished := p.n >= max(r.Passes, 1)
		key := KeyOf(obj)
		status, err := ctl.status(obj, finished, c.Now())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		if equality.Semantic.DeepEqual(obj.Object["status"], status) {
			continue
		}
		next := obj.DeepCopy()
		next.Object["status"] = status
		if err := c.writeStatus(ctx, ctl.actor, gk, next); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		if finished {
			done = append(done, key)
		}
	}
	return done, errors.Join(errs...)
}

// writeStatus updates obj's status as actor, through the status
// subresource.
func (c *Cluster) writeStatus(ctx context.Context, actor string, gk schema.GroupKind, obj *unstructured.Unstructured) error {
	c.mu.Lock()
	k, ok := c.byGK[gk]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("handofftest: kind %s is not served", gk)
	}
	ri := c.ClientFor(actor).Resource(k.gvr)
	var err error
	if k.namespaced {
		_, err = ri.Namespace(obj.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	} else {
		_, err = ri.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	}
	return err
}

// cond is one status condition.
func cond(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message}
}

// specInt reads an integer of the spec, def when absent.
func specInt(obj *unstructured.Unstructured, def int64, path ...string) (int64, error) {
	v, found, err := unstructured.NestedInt64(obj.Object, append([]string{"spec"}, path...)...)
	if err != nil || !found {
		return def, err
	}
	return v, nil
}

func deploymentStatus(obj *unstructured.Unstructured, done bool, _ time.Time) (map[string]any, error) {
	n, err := specInt(obj, 1, "replicas")
	if err != nil {
		return nil, err
	}
	st := map[string]any{"observedGeneration": obj.GetGeneration(), "replicas": n, "updatedReplicas": n}
	if !done {
		st["readyReplicas"], st["availableReplicas"] = int64(0), int64(0)
		st["conditions"] = []any{
			cond("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
			cond("Progressing", "True", "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", obj.GetName())),
		}
		return st, nil
	}
	st["readyReplicas"], st["availableReplicas"] = n, n
	st["conditions"] = []any{
		cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
		cond("Progressing", "True", "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", obj.GetName())),
	}
	return st, nil
}

func statefulSetStatus(obj *unstructured.Unstructured, done bool, _ time.Time) (map[string]any, error) {
	n, err := specInt(obj, 1, "replicas")
	if err != nil {
		return nil, err
	}
	partition, err := specInt(obj, 0, "updateStrategy", "rollingUpdate", "partition")
	if err != nil {
		return nil, err
	}
	strategy, _, err := unstructured.NestedString(obj.Object, "spec", "updateStrategy", "type")
	if err != nil {
		return nil, err
	}
	if strategy == "OnDelete" {
		partition = 0
	}
	revision := fmt.Sprintf("%s-%d", obj.GetName(), obj.GetGeneration())
	current, _, _ := unstructured.NestedString(obj.Object, "status", "currentRevision")
	st := map[string]any{"observedGeneration": obj.GetGeneration(), "replicas": n, "updateRevision": revision}
	if !done {
		st["readyReplicas"], st["updatedReplicas"], st["availableReplicas"] = int64(0), int64(0), int64(0)
		st["currentReplicas"] = n
		if current != "" {
			st["currentRevision"] = current
		}
		return st, nil
	}
	// A partition keeps the replicas below it at the current revision,
	// which then stays what it was.
	updated := max(n-max(partition, 0), 0)
	if updated == n || current == "" {
		current = revision
	}
	st["readyReplicas"], st["availableReplicas"], st["updatedReplicas"] = n, n, updated
	st["currentReplicas"] = n - updated
	if current == revision {
		st["currentReplicas"] = n
	}
	st["currentRevision"] = current
	return st, nil
}

func daemonSetStatus(obj *unstructured.Unstructured, done bool, _ time.Time) (map[string]any, error) {
	updated := int64(0)
	if done {
		updated = 1
	}
	return map[string]any{
		"observedGeneration":     obj.GetGeneration(),
		"desiredNumberScheduled": int64(1),
		"currentNumberScheduled": int64(1),
		"numberMisscheduled":     int64(0),
		"updatedNumberScheduled": updated,
		"numberReady":            updated,
		"numberAvailable":        updated,
	}, nil
}

func jobStatus(obj *unstructured.Unstructured, done bool, now time.Time) (map[string]any, error) {
	completions, err := specInt(obj, 1, "completions")
	if err != nil {
		return nil, err
	}
	started, _, _ := unstructured.NestedString(obj.Object, "status", "startTime")
	if started == "" {
		started = now.UTC().Format(time.RFC3339)
	}
	if !done {
		return map[string]any{"active": int64(1), "startTime": started}, nil
	}
	finished, _, _ := unstructured.NestedString(obj.Object, "status", "completionTime")
	if finished == "" {
		finished = now.UTC().Format(time.RFC3339)
	}
	return map[string]any{
		"active": int64(0), "succeeded": completions, "startTime": started, "completionTime": finished,
		"conditions": []any{cond("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")},
	}, nil
}

func crdStatus(obj *unstructured.Unstructured, done bool, _ time.Time) (map[string]any, error) {
	names, _, err := unstructured.NestedMap(obj.Object, "spec", "names")
	if err != nil {
		return nil, err
	}
	versions, _, err := unstructured.NestedSlice(obj.Object, "spec", "versions")
	if err != nil {
		return nil, err
	}
	var stored []any
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["storage"] == true {
			stored = append(stored, m["name"])
		}
	}
	st := map[string]any{}
	if names != nil {
		st["acceptedNames"] = names
	}
	if stored != nil {
		st["storedVersions"] = stored
	}
	accepted := cond("NamesAccepted", "True", "NoConflicts", "no conflicts found")
	if !done {
		st["conditions"] = []any{accepted, cond("Established", "False", "Installing", "the initial names have been accepted")}
		return st, nil
	}
	st["conditions"] = []any{accepted, cond("Established", "True", "InitialNamesAccepted", "the initial names have been accepted")}
	return st, nil
}

func apiServiceStatus(_ *unstructured.Unstructured, done bool, _ time.Time) (map[string]any, error) {
	if !done {
		return map[string]any{"conditions": []any{cond("Available", "False", "MissingEndpoints", "endpoints for the service have no addresses yet")}}, nil
	}
	return map[string]any{"conditions": []any{cond("Available", "True", "Passed", "all checks passed")}}, nil
}
