package handofftest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// bound is how long a test waits for something that should happen at
// once; reaching it fails the test.
const bound = 20 * time.Second

// events reads n events from w, failing the test if they do not come.
func events(t *testing.T, w watch.Interface, n int) []watch.Event {
	t.Helper()
	var out []watch.Event
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended after %d of %d events: %v", len(out), n, out)
			}
			out = append(out, ev)
		case <-time.After(bound):
			t.Fatalf("no event %d of %d after %v; had %v", len(out)+1, n, bound, out)
		}
	}
	return out
}

// ended waits for w's channel to close, draining it, and fails the test
// if it does not.
func ended(t *testing.T, w watch.Interface) {
	t.Helper()
	deadline := time.After(bound)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the watch did not end within %v", bound)
		}
	}
}

// summary renders events as "TYPE name", with "deleting" for an object
// that has a deletionTimestamp.
func summary(t *testing.T, evs []watch.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			t.Fatalf("event %s: %v", ev.Type, err)
		}
		s := fmt.Sprintf("%s %s", ev.Type, m.GetName())
		if m.GetDeletionTimestamp() != nil {
			s += " deleting"
		}
		out = append(out, s)
	}
	return out
}

// noWatchers waits until the cluster has no open watch.
func noWatchers(t *testing.T, c *Cluster) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		c.mu.Lock()
		n := len(c.watchers)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watches still open after %v", n, bound)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestServeWatch(t *testing.T) {
	ctx := context.Background()
	labelled := func(name, app string) func(ri dynamic.ResourceInterface) error {
		return func(ri dynamic.ResourceInterface) error {
			_, err := ri.Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app)), metav1.PatchOptions{})
			return err
		}
	}
	tests := map[string]struct {
		opts   metav1.ListOptions // ResourceVersion "" is the list's
		writes func(c *Cluster, ri dynamic.ResourceInterface) error
		want   []string
	}{
		"every write after the list, finalizers and garbage collection included": {
			writes: func(c *Cluster, ri dynamic.ResourceInterface) error {
				set := create(t, c.ClientFor("writer").Resource(setGVR), installerSet("owner"))
				dep := ownedBy(configMap("ns", "dependent"), set)
				if _, err := ri.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
					return err
				}
				held := configMap("ns", "held")
				held.SetFinalizers([]string{"example.com/hold"})
				if _, err := ri.Create(ctx, held, metav1.CreateOptions{}); err != nil {
					return err
				}
				if _, err := ri.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"k":"2"}}`), metav1.PatchOptions{}); err != nil {
					return err
				}
				if _, err := ri.Patch(ctx, "a", types.MergePatchType, []byte(`{"status":{"s":"1"}}`), metav1.PatchOptions{}, "status"); err != nil {
					return err
				}
				if err := ri.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
					return err
				}
				if _, err := ri.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
					return err
				}
				return c.ClientFor("writer").Resource(setGVR).Delete(ctx, "owner", metav1.DeleteOptions{})
			},
			want: []string{
				"ADDED dependent", "ADDED held", "MODIFIED a", "MODIFIED a",
				"MODIFIED held deleting", "MODIFIED held deleting", "DELETED held deleting",
				"DELETED dependent",
			},
		},
		"a label selector: objects that start or stop matching are ADDED or DELETED": {
			opts: metav1.ListOptions{LabelSelector: "app=x"},
			writes: func(c *Cluster, ri dynamic.ResourceInterface) error {
				for _, f := range []func(dynamic.ResourceInterface) error{labelled("b", "x"), labelled("a", "y"), labelled("b", "z"), labelled("b", "x")} {
					if err := f(ri); err != nil {
						return err
					}
				}
				return nil
			},
			want: []string{"ADDED b", "DELETED a", "DELETED b", "ADDED b"},
		},
		"a field selector on the name": {
			opts: metav1.ListOptions{FieldSelector: "metadata.name=b"},
			writes: func(c *Cluster, ri dynamic.ResourceInterface) error {
				for _, f := range []func(dynamic.ResourceInterface) error{labelled("a", "1"), labelled("b", "1")} {
					if err := f(ri); err != nil {
						return err
					}
				}
				return ri.Delete(ctx, "b", metav1.DeleteOptions{})
			},
			want: []string{"MODIFIED b", "DELETED b"},
		},
		"from resourceVersion 0: the objects there are, then the writes": {
			opts: metav1.ListOptions{ResourceVersion: "0"},
			writes: func(c *Cluster, ri dynamic.ResourceInterface) error {
				return ri.Delete(ctx, "a", metav1.DeleteOptions{})
			},
			want: []string{"ADDED a", "ADDED b", "DELETED a"},
		},
		"from an older resourceVersion: the writes since, replayed": {
			opts: metav1.ListOptions{ResourceVersion: "1"},
			writes: func(c *Cluster, ri dynamic.ResourceInterface) error {
				return ri.Delete(ctx, "b", metav1.DeleteOptions{})
			},
			want: []string{"MODIFIED a", "ADDED b", "DELETED b"},
		},
	}
	for name, tt := range tests {
		for _, via := range []string{"over HTTP", "in process"} {
			t.Run(name+", "+via, func(t *testing.T) {
				c := newCluster(t)
				in := c.ClientFor("writer").Resource(cmGVR).Namespace("ns")
				a := create(t, in, configMap("ns", "a"))
				a.SetLabels(map[string]string{"app": "x"})
				if _, err := in.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				create(t, in, configMap("ns", "b"))
				ri := c.ClientFor("watcher").Resource(cmGVR).Namespace("ns")
				if via == "over HTTP" {
					ri = httpDynamic(t, startServer(t, c, "watcher")).Resource(cmGVR).Namespace("ns")
				}
				opts := tt.opts
				if opts.ResourceVersion == "" {
					list, err := ri.List(ctx, metav1.ListOptions{})
					if err != nil {
						t.Fatal(err)
					}
					opts.ResourceVersion = list.GetResourceVersion()
				}
				w, err := ri.Watch(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				if err := tt.writes(c, in); err != nil {
					t.Fatal(err)
				}
				evs := events(t, w, len(tt.want))
				if diff := cmp.Diff(tt.want, summary(t, evs)); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				last, _ := meta.Accessor(evs[len(evs)-1].Object)
				if got, want := last.GetResourceVersion(), fmt.Sprint(len(c.Writes())); got != want {
					t.Errorf("the last event's resourceVersion = %s, want the cluster's, %s", got, want)
				}
			})
		}
	}
}

func TestServeWatchStart(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, WithWatchHistory(1))
	in := c.ClientFor("writer").Resource(cmGVR).Namespace("ns")
	for _, name := range []string{"a", "b", "c"} {
		create(t, in, configMap("ns", name))
	}
	s := startServer(t, c, "watcher")
	ri := httpDynamic(t, s).Resource(cmGVR).Namespace("ns")

	t.Run("a resourceVersion older than the history is an Expired event", func(t *testing.T) {
		w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		ev := events(t, w, 1)[0]
		if err := apierrors.FromObject(ev.Object); ev.Type != watch.Error || !apierrors.IsResourceExpired(err) {
			t.Errorf("event %s: %v, want ERROR 410 Expired", ev.Type, err)
		}
		ended(t, w)
	})
	t.Run("the initial events, then a bookmark marking their end", func(t *testing.T) {
		w, err := ri.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		evs := events(t, w, 4)
		if diff := cmp.Diff([]string{"ADDED a", "ADDED b", "ADDED c", "BOOKMARK "}, summary(t, evs)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		m, _ := meta.Accessor(evs[3].Object)
		if m.GetAnnotations()[initialEventsEnd] != "true" || m.GetResourceVersion() != "3" {
			t.Errorf("bookmark annotations %v, resourceVersion %s", m.GetAnnotations(), m.GetResourceVersion())
		}
	})
	t.Run("sendInitialEvents without resourceVersionMatch is Invalid", func(t *testing.T) {
		if _, err := ri.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr(true)}); !apierrors.IsInvalid(err) {
			t.Errorf("got %v, want Invalid", err)
		}
	})
	t.Run("a metadata watch sends PartialObjectMetadata", func(t *testing.T) {
		md := metadata.NewForConfigOrDie(s.Config()).Resource(cmGVR).Namespace("ns")
		w, err := md.Watch(ctx, metav1.ListOptions{ResourceVersion: "3"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := in.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := events(t, w, 1)[0]
		if p, ok := ev.Object.(*metav1.PartialObjectMetadata); !ok || ev.Type != watch.Deleted || p.Name != "a" {
			t.Errorf("event %s %T %v", ev.Type, ev.Object, ev.Object)
		}
	})
	t.Run("a fault fails the watch and leaves no watch open", func(t *testing.T) {
		c.InjectFaults(FailNth(1, AfterCommit, nil), "watcher")
		defer c.DisableFaults()
		if _, err := ri.Watch(ctx, metav1.ListOptions{}); errKind(err) != "500" {
			t.Errorf("got %v, want 500", err)
		}
		noWatchers(t, c)
	})
	if n := c.Calls()[CallKey{Actor: "watcher", Verb: "watch"}]; n != 5 {
		t.Errorf("watch calls = %d, want one for each watch request, 5", n)
	}
}

func TestServeWatchEnds(t *testing.T) {
	ctx := context.Background()
	tests := map[string]func(t *testing.T, c *Cluster, s *Server) watch.Interface{
		"at timeoutSeconds": func(t *testing.T, c *Cluster, s *Server) watch.Interface {
			w, err := httpDynamic(t, s).Resource(cmGVR).Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr(int64(1))})
			if err != nil {
				t.Fatal(err)
			}
			return w
		},
		"when the client stops it": func(t *testing.T, c *Cluster, s *Server) watch.Interface {
			w, err := httpDynamic(t, s).Resource(cmGVR).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
			return w
		},
		"when its context is cancelled": func(t *testing.T, c *Cluster, s *Server) watch.Interface {
			ctx, cancel := context.WithCancel(ctx)
			w, err := httpDynamic(t, s).Resource(cmGVR).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			return w
		},
		"when the server closes": func(t *testing.T, c *Cluster, s *Server) watch.Interface {
			w, err := httpDynamic(t, s).Resource(cmGVR).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			return w
		},
		"in process, when stopped": func(t *testing.T, c *Cluster, s *Server) watch.Interface {
			w, err := c.MetadataFor("x").Resource(cmGVR).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
			return w
		},
	}
	for name, open := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			s := startServer(t, c, "watcher")
			ended(t, open(t, c, s))
			noWatchers(t, c)
		})
	}
}
