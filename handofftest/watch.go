package handofftest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// This file holds watches. A watch reads the cluster's log of writes
// (Cluster.Writes), which records every change of the store with the
// resourceVersion it made, so the events of a watch are exactly the writes
// of its kind: Created is ADDED, Updated and Deleting are MODIFIED,
// Removed is DELETED.

// DefaultWatchHistory is how many of the latest writes a watch may start
// behind unless [WithWatchHistory] says otherwise.
const DefaultWatchHistory = 1000

// initialEventsEnd is the annotation of the bookmark that ends the initial
// events of a watch with sendInitialEvents (metav1.InitialEventsAnnotationKey
// from k8s.io/apimachinery v0.30 on).
const initialEventsEnd = "k8s.io/initial-events-end"

// WithWatchHistory sets how far back a watch may start: a watch from a
// resourceVersion that more than n writes (of any kind) have followed
// fails with 410 Gone (reason Expired), as a real API server's watch cache
// forgets old events, so a reflector lists again. The default is
// [DefaultWatchHistory]; n < 1 means 1.
func WithWatchHistory(n int) Option {
	return func(c *Cluster) { c.history = max(n, 1) }
}

// watcher is one open watch. Its fields other than notify are guarded by
// the cluster's mutex.
type watcher struct {
	k      kindInfo // the registration addressed: events come at its version
	ns     string   // empty for every namespace
	labels labels.Selector
	fields fields.Selector
	pos    int                                // index in c.writes of the next write to look at
	seen   map[Key]*unstructured.Unstructured // the last state of each object sent; nil if it did not pass
	notify chan struct{}                      // signalled after each write
}

// watchStart is a watch registered with the cluster and the events it
// sends before following writes.
type watchStart struct {
	w       *watcher // nil for a watch that ends after its initial events
	initial []watch.Event
	timeout time.Duration
}

// passes reports whether obj is one the watch is for.
func (w *watcher) passes(obj *unstructured.Unstructured) bool {
	return w.labels.Matches(labels.Set(obj.GetLabels())) &&
		w.fields.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()})
}

func (w *watcher) covers(key Key) bool {
	return key.Group == w.k.gvr.Group && key.Kind == w.k.kind && (w.ns == "" || key.Namespace == w.ns)
}

// startWatch registers a watch of gvr in ns with opts, as the API server
// starts one: from resourceVersion "" or "0", or with sendInitialEvents,
// it first sends an ADDED event for each object there is (then, with
// sendInitialEvents, a bookmark marked as their end); from any other
// resourceVersion it replays the writes after it, or, if more than the
// history's writes have followed it, sends one ERROR event, 410 Expired.
// It runs with c.mu held.
func (c *Cluster) startWatch(gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) (*watchStart, error) {
	k, err := c.resolve(gvr, ns, true)
	if err != nil {
		return nil, err
	}
	ls, fs, err := listSelectors(opts)
	if err != nil {
		return nil, err
	}
	w := &watcher{k: k, ns: ns, labels: ls, fields: fs, pos: len(c.writes), seen: map[Key]*unstructured.Unstructured{}, notify: make(chan struct{}, 1)}
	start := &watchStart{w: w}
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		start.timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	switch {
	case initial && opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan:
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", field.ErrorList{
			field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
		})
	case initial || opts.ResourceVersion == "" || opts.ResourceVersion == "0":
		keys, err := c.selected(k, ns, opts)
		if err != nil {
			return nil, err
		}
		for _, key := range keys {
			obj := c.objects[key]
			w.seen[key] = obj
			start.initial = append(start.initial, watch.Event{Type: watch.Added, Object: as(k, obj.DeepCopy())})
		}
		if initial {
			start.initial = append(start.initial, watch.Event{Type: watch.Bookmark, Object: bookmark(k, c.rv, true)})
		}
	default:
		rv, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("handofftest: resourceVersion %q is not a resourceVersion of this cluster", opts.ResourceVersion))
		}
		w.pos = sort.Search(len(c.writes), func(i int) bool { return writeRV(c.writes[i]) > rv })
		if behind := len(c.writes) - w.pos; behind > c.history {
			// As the API server's watch cache answers it: a watch whose one
			// event is the error, so that clients see 410 Expired whatever
			// the transport (client-go's Watch keeps only the HTTP code of a
			// refused request, not its Status).
			gone := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, writeRV(c.writes[len(c.writes)-c.history])-1)).ErrStatus
			gone.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
			return &watchStart{initial: []watch.Event{{Type: watch.Error, Object: &gone}}}, nil
		}
	}
	if c.watchers == nil {
		c.watchers = map[*watcher]struct{}{}
	}
	c.watchers[w] = struct{}{}
	return start, nil
}

func writeRV(w Write) int64 {
	rv, _ := strconv.ParseInt(w.ResourceVersion, 10, 64)
	return rv
}

// bookmark returns the object of a BOOKMARK event: the kind and the
// resourceVersion, nothing else.
func bookmark(k kindInfo, rv int64, initialEnd bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(k.gvk())
	u.SetResourceVersion(strconv.FormatInt(rv, 10))
	if initialEnd {
		u.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	return u
}

// notifyWatchers wakes every open watch after a write. It runs with c.mu
// held and never blocks.
func (c *Cluster) notifyWatchers() {
	for w := range c.watchers {
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
}

// unwatch forgets a watch; w may be nil.
func (c *Cluster) unwatch(w *watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.watchers, w)
}

// pending returns the events of the writes w has not looked at yet, as
// the API server turns writes into the events of a filtered watch: an
// object that starts to pass the selectors is ADDED, one that stops
// passing is DELETED (its last state that passed, at the new
// resourceVersion).
func (c *Cluster) pending(w *watcher) []watch.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []watch.Event
	for ; w.pos < len(c.writes); w.pos++ {
		wr := c.writes[w.pos]
		if !w.covers(wr.Key) {
			continue
		}
		prev, known := w.seen[wr.Key]
		if !known {
			prev = c.passedBefore(w, w.pos)
		}
		var cur *unstructured.Unstructured
		if wr.Effect != Removed && w.passes(wr.Object) {
			cur = wr.Object
		}
		w.seen[wr.Key] = cur
		switch {
		case cur != nil && prev != nil:
			out = append(out, watch.Event{Type: watch.Modified, Object: as(w.k, cur.DeepCopy())})
		case cur != nil:
			out = append(out, watch.Event{Type: watch.Added, Object: as(w.k, cur.DeepCopy())})
		case prev != nil:
			gone := prev.DeepCopy()
			if wr.Effect == Removed {
				gone = wr.Object.DeepCopy()
			}
			gone.SetResourceVersion(wr.ResourceVersion)
			out = append(out, watch.Event{Type: watch.Deleted, Object: as(w.k, gone)})
		}
	}
	return out
}

// passedBefore returns the state of the object written at c.writes[i]
// before that write if it passed w's selectors, or nil.
func (c *Cluster) passedBefore(w *watcher, i int) *unstructured.Unstructured {
	key := c.writes[i].Key
	for j := i - 1; j >= 0; j-- {
		if prev := c.writes[j]; prev.Key == key {
			if prev.Effect == Removed || !w.passes(prev.Object) {
				return nil
			}
			return prev.Object
		}
	}
	return nil
}

// run sends the watch's events on a channel until ctx is done, the
// watch's timeout passes or the returned watch is stopped.
func (c *Cluster) run(ctx context.Context, start *watchStart) watch.Interface {
	ch := make(chan watch.Event)
	pw := watch.NewProxyWatcher(ch)
	go func() {
		defer close(ch)
		defer c.unwatch(start.w)
		var expired <-chan time.Time
		if start.timeout > 0 {
			t := time.NewTimer(start.timeout)
			defer t.Stop()
			expired = t.C
		}
		send := func(evs []watch.Event) bool {
			for _, ev := range evs {
				select {
				case ch <- ev:
				case <-pw.StopChan():
					return false
				case <-ctx.Done():
					return false
				case <-expired:
					return false
				}
			}
			return true
		}
		if !send(start.initial) || start.w == nil {
			return
		}
		for {
			if !send(c.pending(start.w)) {
				return
			}
			select {
			case <-start.w.notify:
			case <-pw.StopChan():
				return
			case <-ctx.Done():
				return
			case <-expired:
				return
			}
		}
	}()
	return pw
}
