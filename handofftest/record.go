package handofftest

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// Interval is one lifetime of an object: from its creation to its removal
// from storage. A re-created object starts a new Interval.
type Interval struct {
	// UID is the object's metadata.uid during the interval.
	UID types.UID
	// From is the time the object was created.
	From time.Time
	// Deleting is the time its deletionTimestamp was set; zero if never.
	Deleting time.Time
	// To is the time it was removed; zero while it still exists.
	To time.Time
}

// Contains reports whether the object existed at t: From <= t, and t < To
// unless To is zero.
func (i Interval) Contains(t time.Time) bool {
	return !t.Before(i.From) && (i.To.IsZero() || t.Before(i.To))
}

// Effect is what a [Write] did to the stored object.
type Effect string

// Effects of writes.
const (
	// Created: the object was stored.
	Created Effect = "created"
	// Updated: the stored object changed (spec, status or metadata).
	Updated Effect = "updated"
	// Deleting: the object got its deletionTimestamp and stays stored
	// until its finalizers are gone.
	Deleting Effect = "deleting"
	// Removed: the object is gone from storage.
	Removed Effect = "removed"
)

// Write is one change of the stored state. A call that changes nothing
// (an update to identical content, a delete of an object already being
// deleted) is not a Write; one call may cause several, for example a
// delete and the garbage collection that follows it.
type Write struct {
	// Time is the clock time of the call that caused the write.
	Time time.Time
	// Actor is the client's actor, [GCActor] or [SeedActor].
	Actor string
	// Verb is the API verb that caused the write: create, update, patch,
	// delete or deletecollection; the garbage collector patches and
	// deletes.
	Verb string
	// Subresource is "status" for a status write, otherwise empty.
	Subresource string
	// Key identifies the object.
	Key Key
	// UID is the object's metadata.uid.
	UID types.UID
	// ResourceVersion is the cluster's resourceVersion after the write.
	ResourceVersion string
	// Effect is what the write did.
	Effect Effect
	// Object is a copy of the object after the write (before its removal
	// for Removed).
	Object *unstructured.Unstructured
}

// String renders the write for a log line.
func (w Write) String() string {
	actor := w.Actor
	if actor == "" {
		actor = `""`
	}
	verb := w.Verb
	if w.Subresource != "" {
		verb += "/" + w.Subresource
	}
	return fmt.Sprintf("%s %s %s %s: %s rv=%s", w.Time.Format(time.RFC3339), actor, verb, w.Key, w.Effect, w.ResourceVersion)
}

// Action is one API call made through a client of the cluster. It embeds
// the client-go testing form of the call, so code written against
// k8s.io/client-go/testing (Matches, GetVerb, GetResource, …) works on it.
// That form is the one client-go has from v0.29 on: it carries the call's
// options only for delete (DeleteOptions), not for the other verbs.
type Action struct {
	k8stesting.Action
	// Actor is the actor of the client that made the call.
	Actor string
	// Name is the name of the object the call was about, which the
	// client-go form of create and update calls does not give: for a
	// create, the name of the object created (the one the server made from
	// metadata.generateName, even when the response was lost), or the
	// requested metadata.name when nothing was created; for an update, the
	// object's metadata.name; for get, patch and delete, the name asked
	// for; empty for list, deletecollection and watch.
	Name string
	// Time is the clock time of the call.
	Time time.Time
	// Err is the error the caller got, injected or not.
	Err error
	// Metadata is true for a call of a client from [Cluster.MetadataFor].
	Metadata bool
	// Injected reports whether Err was injected by a fault.
	Injected bool
}

// CallKey counts calls in [Cluster.Calls].
type CallKey struct {
	// Actor is the actor of the client that made the calls.
	Actor string
	// Verb is get, list, create, update, patch, delete,
	// deletecollection, watch or apply.
	Verb string
}

// Timeline returns the lifetimes of the object with the given key, oldest
// first.
func (c *Cluster) Timeline(key Key) []Interval {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Interval(nil), c.timelines[key]...)
}

// Keys returns the keys of every object that ever existed, sorted.
func (c *Cluster) Keys() []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]Key, 0, len(c.timelines))
	for k := range c.timelines {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	return keys
}

// Writes returns every write so far, in order.
func (c *Cluster) Writes() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Write, len(c.writes))
	for i, w := range c.writes {
		w.Object = w.Object.DeepCopy()
		out[i] = w
	}
	return out
}

// WritesSince returns the writes after the first n, in order: with n the
// length of an earlier [Cluster.Writes] (or n plus the length of an
// earlier WritesSince), the writes made since, without copying those
// before.
func (c *Cluster) WritesSince(n int) []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n >= len(c.writes) {
		return nil
	}
	out := make([]Write, len(c.writes)-n)
	for i, w := range c.writes[n:] {
		w.Object = w.Object.DeepCopy()
		out[i] = w
	}
	return out
}

// Actions returns every API call so far, in order.
func (c *Cluster) Actions() []Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Action(nil), c.actions...)
}

// Calls returns the number of API calls by actor and verb.
func (c *Cluster) Calls() map[CallKey]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[CallKey]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// ClearActions forgets the recorded actions and call counts. Timelines and
// writes are kept.
func (c *Cluster) ClearActions() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.actions = nil
	c.calls = map[CallKey]int{}
}

// event is the part of a Write known before the object is.
type event struct {
	now         time.Time
	actor       string
	verb        string
	subresource string
}

// record appends a write for obj, which is already stored (or, for
// Removed, just dropped), and keeps the timeline in step.
func (c *Cluster) record(ev event, effect Effect, obj *unstructured.Unstructured) {
	key := KeyOf(obj)
	switch effect {
	case Created:
		c.timelines[key] = append(c.timelines[key], Interval{UID: obj.GetUID(), From: ev.now})
	case Deleting:
		if tl := c.timelines[key]; len(tl) > 0 {
			tl[len(tl)-1].Deleting = ev.now
		}
	case Removed:
		if tl := c.timelines[key]; len(tl) > 0 {
			tl[len(tl)-1].To = ev.now
		}
	}
	c.writes = append(c.writes, Write{
		Time:            ev.now,
		Actor:           ev.actor,
		Verb:            ev.verb,
		Subresource:     ev.subresource,
		Key:             key,
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
		Effect:          effect,
		Object:          obj.DeepCopy(),
	})
	c.notifyWatchers()
}
