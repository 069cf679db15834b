package handoff

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Reasons [Rollout] and [RolloutProbe] give. Where a status is missing,
// behind its spec or malformed they give [ReasonNoStatus], [ReasonStale]
// and [ReasonMalformed], as [ConditionProbe] does.
const (
	// ReasonRolledOut: the object is rolled out (every object, for
	// ReadyFrom).
	ReasonRolledOut = "RolledOut"
	// ReasonRolloutInProgress: the controller has seen the current spec
	// and the rollout is under way: replicas still to update or to become
	// available, a Job still running, a CRD not yet established.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonRolloutFailed: the rollout stopped and will not finish by
	// itself: a Deployment past its progress deadline, a failed Job, a CRD
	// whose names were not accepted.
	ReasonRolloutFailed = "RolloutFailed"
	// ReasonRolloutPaused: a Deployment has spec.paused set, so its
	// rollout does not progress until it is resumed.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonRolloutMissing: a listed object that has a rollout does not
	// exist yet.
	ReasonRolloutMissing = "RolloutMissing"
	// ReasonRolloutReadError: reading a listed object failed for another
	// reason than NotFound; the readiness is Unknown.
	ReasonRolloutReadError = "RolloutReadError"
	// ReasonRolloutUnread: [RolloutProbe.Ready] was asked about the set
	// object alone, which does not say whether what it lists is rolled
	// out.
	ReasonRolloutUnread = "RolloutNotRead"
	// ReasonRolloutNotApplied: with [RolloutProbe.Stamped], an object the
	// set lists was last written for another set (or by nobody that
	// stamps): the operator has not applied it for this set yet.
	ReasonRolloutNotApplied = "RolloutNotApplied"
)

// The kinds that have a rollout, with their groups.
var (
	gkDeployment  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	gkStatefulSet = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	gkDaemonSet   = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	gkJob         = schema.GroupKind{Group: "batch", Kind: "Job"}
	gkCRD         = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	gkAPIService  = schema.GroupKind{Group: "apiregistration.k8s.io", Kind: "APIService"}
)

// RolloutKinds returns the kinds whose rollout [Rollout] reads, and so the
// kinds [RolloutProbe.Reads] selects: apps Deployment, StatefulSet and
// DaemonSet, batch Job, apiextensions.k8s.io CustomResourceDefinition and
// apiregistration.k8s.io APIService. Every other kind is rolled out once it
// exists. The slice is a fresh copy on each call.
func RolloutKinds() []schema.GroupKind {
	return []schema.GroupKind{gkDeployment, gkStatefulSet, gkDaemonSet, gkJob, gkCRD, gkAPIService}
}

func hasRollout(gk schema.GroupKind) bool {
	switch gk {
	case gkDeployment, gkStatefulSet, gkDaemonSet, gkJob, gkCRD, gkAPIService:
		return true
	}
	return false
}

// Rollout says whether one live object is rolled out for its current spec.
// It does no I/O. By kind:
//
//   - Deployment: the controller has observed the spec
//     (status.observedGeneration >= metadata.generation), it is not paused,
//     its progress deadline is not exceeded (that is [ReasonRolloutFailed]),
//     and, as kubectl rollout status checks, every desired replica
//     (spec.replicas, 1 when absent) is updated, no old replica is left,
//     every updated replica is available; and the Available condition is
//     True. Available alone is not enough: it stays True through a rolling
//     update that keeps enough old replicas up.
//   - StatefulSet: the spec is observed and every replica is ready; with
//     the RollingUpdate strategy (the default), at least spec.replicas
//     minus the partition replicas are updated and, when the partition is
//     0, the current revision is the update revision. With OnDelete, pods
//     are only replaced when deleted, so observed and ready is all.
//   - DaemonSet: the spec is observed; with RollingUpdate (the default)
//     every desired pod is updated and available.
//   - Job: the Complete condition is True; Failed=True is
//     [ReasonRolloutFailed].
//   - CustomResourceDefinition: Established is True; NamesAccepted=False is
//     [ReasonRolloutFailed].
//   - APIService: Available is True.
//   - any other kind: Ready; existing is all there is to it.
//
// A missing status is NotReady with [ReasonNoStatus], a status for an
// older generation NotReady with [ReasonStale], and a field of the wrong
// type Unknown with [ReasonMalformed]. Every message starts with the
// object, "Kind namespace/name" or "Kind name" when cluster-scoped, and
// says what is missing, for example "Deployment knative-serving/activator:
// 1 of 2 updated replicas available".
func Rollout(obj *unstructured.Unstructured) Readiness {
	if obj == nil {
		return Readiness{State: Unknown, Reason: ReasonNoStatus, Message: "no object"}
	}
	gk := obj.GroupVersionKind().GroupKind()
	name := objectName(gk.Kind, obj.GetNamespace(), obj.GetName())
	if !hasRollout(gk) {
		return Readiness{State: Ready, Reason: ReasonRolledOut, Message: name + ": exists, no rollout to wait for"}
	}
	c := &check{r: reader{obj: obj.Object}, name: name}
	switch gk {
	case gkDeployment:
		c.deployment(obj.GetGeneration())
	case gkStatefulSet:
		c.statefulSet(obj.GetGeneration())
	case gkDaemonSet:
		c.daemonSet(obj.GetGeneration())
	case gkJob:
		c.job()
	case gkCRD:
		c.crd()
	case gkAPIService:
		c.apiService()
	}
	return c.result()
}

// objectName renders an object as "Kind namespace/name", or "Kind name"
// when it is cluster-scoped.
func objectName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// check is one Rollout decision under way: the first verdict set wins, and
// a field of the wrong type read on the way turns it into Unknown.
type check struct {
	r    reader
	name string
	out  *Readiness
}

// set records a verdict unless one is already recorded.
func (c *check) set(state State, reason, format string, args ...any) {
	if c.out == nil {
		c.out = &Readiness{State: state, Reason: reason, Message: c.name + ": " + fmt.Sprintf(format, args...)}
	}
}

func (c *check) notReady(reason, format string, args ...any) {
	c.set(NotReady, reason, format, args...)
}

func (c *check) result() Readiness {
	if c.r.err != nil {
		return Readiness{State: Unknown, Reason: ReasonMalformed, Message: fmt.Sprintf("%s: %v", c.name, c.r.err)}
	}
	if c.out == nil {
		return Readiness{State: Ready, Reason: ReasonRolledOut, Message: c.name + ": rolled out"}
	}
	return *c.out
}

// hasStatus records NoStatus when the object has no status or an empty
// one, and reports whether it has one.
func (c *check) hasStatus() bool {
	v, found, err := unstructured.NestedFieldNoCopy(c.r.obj, "status")
	if err != nil {
		c.r.fail(err)
		return false
	}
	if !found || v == nil {
		c.notReady(ReasonNoStatus, "no status yet")
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.r.fail(fmt.Errorf(".status accessor error: %v is of the type %T, expected map[string]interface{}", v, v))
		return false
	}
	if len(m) == 0 {
		c.notReady(ReasonNoStatus, "no status yet")
		return false
	}
	return true
}

// observed records Stale unless status.observedGeneration has reached
// generation, and reports whether it has.
func (c *check) observed(generation int64) bool {
	og, found := c.r.intFound("status", "observedGeneration")
	switch {
	case c.r.err != nil:
		return false
	case !found:
		c.notReady(ReasonStale, "the controller has not observed generation %d yet", generation)
		return false
	case og < generation:
		c.notReady(ReasonStale, "status is for generation %d, spec is at %d", og, generation)
		return false
	}
	return true
}

func (c *check) deployment(generation int64) {
	desired := c.r.int(1, "spec", "replicas")
	paused := c.r.bool("spec", "paused")
	if c.r.err != nil {
		return
	}
	if paused {
		c.notReady(ReasonRolloutPaused, "paused (spec.paused is true); the rollout does not progress until it is resumed")
		return
	}
	if !c.hasStatus() || !c.observed(generation) {
		return
	}
	replicas := c.r.int(0, "status", "replicas")
	updated := c.r.int(0, "status", "updatedReplicas")
	available := c.r.int(0, "status", "availableReplicas")
	conds := c.r.conditions()
	if c.r.err != nil {
		return
	}
	if p, ok := conds["Progressing"]; ok && p.Status == "False" && p.Reason == "ProgressDeadlineExceeded" {
		c.notReady(ReasonRolloutFailed, "progress deadline exceeded: %s", p.Message)
		return
	}
	switch {
	case updated < desired:
		c.notReady(ReasonRolloutInProgress, "%d of %d replicas updated", updated, desired)
	case updated > desired:
		c.notReady(ReasonRolloutInProgress, "%d updated replicas, %d desired", updated, desired)
	case replicas > updated:
		c.notReady(ReasonRolloutInProgress, "%s pending termination", plural(replicas-updated, "old replica", "old replicas"))
	case available != updated:
		c.notReady(ReasonRolloutInProgress, "%d of %d updated replicas available", available, updated)
	}
	c.condTrue(conds, "Available")
}

func (c *check) statefulSet(generation int64) {
	desired := c.r.int(1, "spec", "replicas")
	strategy := c.r.str("RollingUpdate", "spec", "updateStrategy", "type")
	partition := c.r.int(0, "spec", "updateStrategy", "rollingUpdate", "partition")
	if c.r.err != nil || !c.hasStatus() || !c.observed(generation) {
		return
	}
	updated := c.r.int(0, "status", "updatedReplicas")
	ready := c.r.int(0, "status", "readyReplicas")
	current := c.r.str("", "status", "currentRevision")
	update := c.r.str("", "status", "updateRevision")
	if c.r.err != nil {
		return
	}
	rolling := strategy == "RollingUpdate"
	// Only the ordinals at or above the partition move to the update
	// revision.
	partition = max(partition, 0)
	switch {
	case rolling && partition > 0 && updated < desired-partition:
		c.notReady(ReasonRolloutInProgress, "%d of %d replicas updated (partition %d)", updated, desired-partition, partition)
	case rolling && updated < desired-partition:
		c.notReady(ReasonRolloutInProgress, "%d of %d replicas updated", updated, desired)
	case ready != desired:
		c.notReady(ReasonRolloutInProgress, "%d of %d replicas ready", ready, desired)
	case rolling && partition == 0 && current != update:
		// The controller makes the update revision current once every
		// replica is updated and ready; with a partition it never does.
		c.notReady(ReasonRolloutInProgress, "current revision %q is not update revision %q yet", current, update)
	}
}

func (c *check) daemonSet(generation int64) {
	strategy := c.r.str("RollingUpdate", "spec", "updateStrategy", "type")
	if c.r.err != nil || !c.hasStatus() || !c.observed(generation) || strategy != "RollingUpdate" {
		return
	}
	desired := c.r.int(0, "status", "desiredNumberScheduled")
	updated := c.r.int(0, "status", "updatedNumberScheduled")
	available := c.r.int(0, "status", "numberAvailable")
	if c.r.err != nil {
		return
	}
	switch {
	case updated != desired:
		c.notReady(ReasonRolloutInProgress, "%d of %d scheduled pods updated", updated, desired)
	case available != desired:
		c.notReady(ReasonRolloutInProgress, "%d of %d scheduled pods available", available, desired)
	}
}

func (c *check) job() {
	if !c.hasStatus() {
		return
	}
	conds := c.r.conditions()
	active := c.r.int(0, "status", "active")
	succeeded := c.r.int(0, "status", "succeeded")
	failed := c.r.int(0, "status", "failed")
	if c.r.err != nil {
		return
	}
	if f, ok := conds["Failed"]; ok && f.Status == "True" {
		c.notReady(ReasonRolloutFailed, "failed: %s", f.text())
		return
	}
	if done, ok := conds["Complete"]; ok && done.Status == "True" {
		return
	}
	if s, ok := conds["Suspended"]; ok && s.Status == "True" {
		c.notReady(ReasonRolloutInProgress, "suspended")
		return
	}
	c.notReady(ReasonRolloutInProgress, "not complete (%d active, %d succeeded, %d failed)", active, succeeded, failed)
}

func (c *check) crd() {
	if !c.hasStatus() {
		return
	}
	conds := c.r.conditions()
	if c.r.err != nil {
		return
	}
	if n, ok := conds["NamesAccepted"]; ok && n.Status == "False" {
		c.notReady(ReasonRolloutFailed, "names not accepted: %s", n.text())
		return
	}
	c.condTrue(conds, "Established")
}

func (c *check) apiService() {
	if !c.hasStatus() {
		return
	}
	conds := c.r.conditions()
	if c.r.err != nil {
		return
	}
	c.condTrue(conds, "Available")
}

// condTrue records InProgress unless the condition typ is True.
func (c *check) condTrue(conds map[string]condition, typ string) {
	cond, ok := conds[typ]
	switch {
	case !ok:
		c.notReady(ReasonRolloutInProgress, "no %s condition yet", typ)
	case cond.Status != "True":
		status := cond.Status
		if status == "" {
			status = "not set"
		}
		if t := cond.text(); t != "" {
			c.notReady(ReasonRolloutInProgress, "%s is %s: %s", typ, status, t)
		} else {
			c.notReady(ReasonRolloutInProgress, "%s is %s", typ, status)
		}
	}
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// condition is one entry of status.conditions.
type condition struct {
	Status, Reason, Message string
}

// text renders the reason and message, for a verdict's message.
func (c condition) text() string {
	switch {
	case c.Reason == "":
		return c.Message
	case c.Message == "":
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// reader reads typed fields of an unstructured object and keeps the first
// error, a field of the wrong type.
type reader struct {
	obj map[string]any
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// intFound returns the integer at path and whether it is there.
func (r *reader) intFound(path ...string) (int64, bool) {
	v, found, err := unstructured.NestedInt64(r.obj, path...)
	if err != nil {
		r.fail(err)
		return 0, false
	}
	return v, found
}

// int returns the integer at path, def when it is absent.
func (r *reader) int(def int64, path ...string) int64 {
	if v, found := r.intFound(path...); found {
		return v
	}
	return def
}

func (r *reader) bool(path ...string) bool {
	v, _, err := unstructured.NestedBool(r.obj, path...)
	if err != nil {
		r.fail(err)
	}
	return v
}

// str returns the string at path, def when it is absent.
func (r *reader) str(def string, path ...string) string {
	v, found, err := unstructured.NestedString(r.obj, path...)
	if err != nil {
		r.fail(err)
		return def
	}
	if !found {
		return def
	}
	return v
}

// conditions returns status.conditions by type; the first of a type wins.
// apimachinery's meta.FindStatusCondition takes typed metav1.Conditions,
// not unstructured ones, hence the loop.
func (r *reader) conditions() map[string]condition {
	v, found, err := unstructured.NestedFieldNoCopy(r.obj, "status", "conditions")
	if err != nil {
		r.fail(err)
		return nil
	}
	if !found || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.fail(fmt.Errorf(".status.conditions accessor error: %v is of the type %T, expected []interface{}", v, v))
		return nil
	}
	out := make(map[string]condition, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			r.fail(fmt.Errorf(".status.conditions[%d] accessor error: %v is of the type %T, expected map[string]interface{}", i, item, item))
			return nil
		}
		var f [4]string
		for j, key := range []string{"type", "status", "reason", "message"} {
			s, _, err := unstructured.NestedString(m, key)
			if err != nil {
				r.fail(fmt.Errorf(".status.conditions[%d]%w", i, err))
				return nil
			}
			f[j] = s
		}
		if _, seen := out[f[0]]; !seen {
			out[f[0]] = condition{Status: f[1], Reason: f[2], Message: f[3]}
		}
	}
	return out
}
