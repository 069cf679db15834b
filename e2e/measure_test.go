//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
)

// apiCounter counts the requests a client sends, by Kubernetes verb, and
// the response bytes it reads. Wrap a rest.Config's transport with it.
type apiCounter struct {
	mu    sync.Mutex
	calls map[string]int
	bytes atomic.Int64
}

// apiCount is what an apiCounter saw up to some moment.
type apiCount struct {
	calls map[string]int
	bytes int64 // response bodies as the client read them (after gzip)
}

// client returns a dynamic client over the control plane's admin
// identity, with no client-side rate limit, whose requests c counts (c
// nil: not counted).
func (c *apiCounter) client() (dynamic.Interface, error) {
	cfg := cp.Config()
	cfg.QPS = -1 // no client-side limit: the figures are the API server's and ours
	if c != nil {
		cfg.Wrap(c.wrap)
	}
	return dynamic.NewForConfig(cfg)
}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		verb := verbOf(req)
		c.mu.Lock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.calls[verb]++
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
		}
		return resp, err
	})
}

// now returns what c has counted so far.
func (c *apiCounter) now() apiCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return apiCount{calls: maps.Clone(c.calls), bytes: c.bytes.Load()}
}

// since returns what c counted after at.
func (c *apiCounter) since(at apiCount) apiCount {
	cur := c.now()
	out := apiCount{calls: map[string]int{}, bytes: cur.bytes - at.bytes}
	for v, n := range cur.calls {
		if d := n - at.calls[v]; d != 0 {
			out.calls[v] = d
		}
	}
	return out
}

func (a apiCount) add(b apiCount) apiCount {
	out := apiCount{calls: maps.Clone(a.calls), bytes: a.bytes + b.bytes}
	if out.calls == nil {
		out.calls = map[string]int{}
	}
	for v, n := range b.calls {
		out.calls[v] += n
	}
	return out
}

func (a apiCount) total() int {
	n := 0
	for _, c := range a.calls {
		n += c
	}
	return n
}

// String renders the calls by verb, e.g. "get 101, list 3, patch 99".
func (a apiCount) String() string {
	verbs := make([]string, 0, len(a.calls))
	for v := range a.calls {
		verbs = append(verbs, v)
	}
	slices.Sort(verbs)
	var parts []string
	for _, v := range verbs {
		parts = append(parts, fmt.Sprintf("%s %d", v, a.calls[v]))
	}
	return strings.Join(parts, ", ")
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// verbOf names the Kubernetes verb of a request from its method and path:
// GET of a collection is list (or watch, with watch=true), of an object
// get; POST create, PUT update, PATCH patch, DELETE delete (of a
// collection, deletecollection). Anything not under /api or /apis (such
// as discovery at /version) is its lower-case method.
func verbOf(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(r.Method)
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // a namespaced resource: namespaces/<ns>/<resource>...
	}
	collection := len(parts) == 1
	switch r.Method {
	case http.MethodGet:
		if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
			return "watch"
		}
		if collection {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if collection {
			return "deletecollection"
		}
		return "delete"
	}
	return strings.ToLower(r.Method)
}

// heapObjects is the runtime/metrics name of the bytes of heap objects:
// live ones and dead ones the garbage collector has not yet freed.
const heapObjects = "/memory/classes/heap/objects:bytes"

// heapPeak runs f and returns by how much the heap's object bytes grew
// above their value before f at most: it collects garbage first, then
// samples runtime/metrics every millisecond while f runs, and once after.
// Every goroutine of the process counts, so the caller runs nothing else
// meanwhile; the peak includes garbage not yet collected at the default
// GOGC, so it is the heap f needs in a process that runs only f.
func heapPeak(f func()) uint64 {
	sample := []metrics.Sample{{Name: heapObjects}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		s := []metrics.Sample{{Name: heapObjects}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				metrics.Read(s)
				if v := s[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	f()
	close(done)
	<-stopped
	p := max(peak.Load(), read())
	if p < base {
		return 0
	}
	return p - base
}
