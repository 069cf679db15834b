//go:build e2e

package e2e

import (
	"context"
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
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// apiCounter counts the requests a client sends, by Kubernetes verb, the
// response bytes it reads and the wall time its calls take. Wrap a
// rest.Config's transport with it.
type apiCounter struct {
	mu    sync.Mutex
	calls map[string]int
	lists map[listScope]int
	bytes atomic.Int64
	// limiter, if set (see throttle), is the client-side rate limiter of
	// c's clients, made from qps and burst.
	limiter flowcontrol.RateLimiter
	qps     float32
	burst   int
	// open counts c's calls under way (waiting for the limiter, or sent
	// and their response not yet read), since opened; busy is the time
	// during which one was under way before; waited sums the calls' waits
	// for the limiter.
	open         int
	opened       time.Time
	busy, waited time.Duration
	// spent sums the calls' wall time by verb, from sending a call to
	// reading the end of its response (waits for the limiter excluded):
	// calls that overlap each count whole.
	spent map[string]time.Duration
}

// apiCount is what an apiCounter saw up to some moment.
type apiCount struct {
	calls map[string]int
	// lists counts the list requests by what they listed: first pages,
	// and further pages apart.
	lists map[listScope]int
	bytes int64 // response bodies as the client read them (after gzip)
	// busy is the wall time during which at least one call was under way,
	// waits for the client-side rate limiter included (watches excluded);
	// waited is the calls' time in those waits, summed.
	busy, waited time.Duration
	spent        map[string]time.Duration
}

// throttle gives c's clients client-go's client-side rate limiter: the
// token bucket rest.RESTClientFor makes from a rest.Config's QPS and Burst
// (5 and 10 unless raised), one for all of c's clients. qps 0 leaves them
// unlimited.
func (c *apiCounter) throttle(qps float32, burst int) {
	c.limiter, c.qps, c.burst = nil, qps, burst
	if qps > 0 {
		c.limiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
}

// client returns a dynamic client over the control plane's admin
// identity whose requests c counts (c nil: not counted), with c's
// client-side rate limiter if throttle gave it one, else none.
func (c *apiCounter) client() (dynamic.Interface, error) {
	return dynamic.NewForConfig(c.config())
}

// metadataClient is client's metadata client (client-go's metadata
// package: PartialObjectMetadata, protobuf), counted and limited with it.
func (c *apiCounter) metadataClient() (metadata.Interface, error) {
	return metadata.NewForConfig(c.config())
}

// config is the rest.Config of c's clients.
func (c *apiCounter) config() *rest.Config {
	cfg := cp.Config()
	cfg.QPS = -1 // no client-side limit: the figures are the API server's and ours
	if c != nil {
		if c.limiter != nil {
			// The limiter rest.RESTClientFor would make of QPS and
			// Burst (a RateLimiter overrides them), with its waits timed.
			cfg.QPS, cfg.Burst = c.qps, c.burst
			cfg.RateLimiter = timedLimiter{c.limiter, c}
		}
		cfg.Wrap(c.wrap)
	}
	return cfg
}

// splitClient returns a dynamic client whose requests c counts, but for
// those to, when it returns true, counts instead, after waiting for to's
// rate limiter (if any) as to's own clients do: the calls a component
// makes for another through a client they share.
func (c *apiCounter) splitClient(to *apiCounter, route func(*http.Request) bool) (dynamic.Interface, error) {
	cfg := cp.Config()
	cfg.QPS = -1 // c's own calls: no client-side limit
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		mine, theirs := c.wrap(rt), to.wrap(rt)
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if !route(req) {
				return mine.RoundTrip(req)
			}
			if to.limiter != nil {
				if err := (timedLimiter{to.limiter, to}).Wait(req.Context()); err != nil {
					return nil, err
				}
			}
			return theirs.RoundTrip(req)
		})
	})
	return dynamic.NewForConfig(cfg)
}

// timedLimiter is a rate limiter whose waits c counts.
type timedLimiter struct {
	flowcontrol.RateLimiter
	c *apiCounter
}

func (l timedLimiter) Wait(ctx context.Context) error {
	l.c.enter()
	began := time.Now()
	err := l.RateLimiter.Wait(ctx)
	l.c.mu.Lock()
	l.c.waited += time.Since(began)
	l.c.mu.Unlock()
	l.c.leave()
	return err
}

// enter and leave bracket a call under way, for busy.
func (c *apiCounter) enter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == 0 {
		c.opened = time.Now()
	}
	c.open++
}

func (c *apiCounter) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open--; c.open == 0 {
		c.busy += time.Since(c.opened)
	}
}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		verb := verbOf(req)
		c.mu.Lock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.calls[verb]++
		if verb == "list" {
			if c.lists == nil {
				c.lists = map[listScope]int{}
			}
			c.lists[listScopeOf(req)]++
		}
		c.mu.Unlock()
		if verb == "watch" {
			// Open as long as it watches: not a call's wall time.
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.Body != nil {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
			}
			return resp, err
		}
		c.enter()
		sent := time.Now()
		done := func() {
			c.leave()
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.spent == nil {
				c.spent = map[string]time.Duration{}
			}
			c.spent[verb] += time.Since(sent)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.Body == nil {
			done()
			return resp, err
		}
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes, done: done}
		return resp, err
	})
}

// now returns what c has counted so far.
func (c *apiCounter) now() apiCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	busy := c.busy
	if c.open > 0 {
		busy += time.Since(c.opened)
	}
	return apiCount{calls: maps.Clone(c.calls), lists: maps.Clone(c.lists), bytes: c.bytes.Load(), busy: busy, waited: c.waited, spent: maps.Clone(c.spent)}
}

// since returns what c counted after at.
func (c *apiCounter) since(at apiCount) apiCount {
	cur := c.now()
	out := apiCount{calls: map[string]int{}, lists: map[listScope]int{}, bytes: cur.bytes - at.bytes, busy: cur.busy - at.busy, waited: cur.waited - at.waited}
	for v, n := range cur.calls {
		if d := n - at.calls[v]; d != 0 {
			out.calls[v] = d
		}
	}
	for l, n := range cur.lists {
		if d := n - at.lists[l]; d != 0 {
			out.lists[l] = d
		}
	}
	out.spent = map[string]time.Duration{}
	for v, d := range cur.spent {
		if d -= at.spent[v]; d != 0 {
			out.spent[v] = d
		}
	}
	return out
}

func (a apiCount) add(b apiCount) apiCount {
	out := apiCount{calls: maps.Clone(a.calls), lists: maps.Clone(a.lists), bytes: a.bytes + b.bytes, busy: a.busy + b.busy, waited: a.waited + b.waited}
	if out.calls == nil {
		out.calls = map[string]int{}
	}
	if out.lists == nil {
		out.lists = map[listScope]int{}
	}
	for v, n := range b.calls {
		out.calls[v] += n
	}
	for l, n := range b.lists {
		out.lists[l] += n
	}
	out.spent = maps.Clone(a.spent)
	if out.spent == nil {
		out.spent = map[string]time.Duration{}
	}
	for v, d := range b.spent {
		out.spent[v] += d
	}
	return out
}

// spentString renders a's time in calls by verb, in the order of verbs.
func (a apiCount) spentString(verbs []string) string {
	var parts []string
	for _, v := range verbs {
		if d := a.spent[v]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f s", v, d.Seconds()))
		}
	}
	return strings.Join(parts, ", ")
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

// countingBody counts the bytes read into n and calls done (if set) once,
// at the end of the body or when it is closed, whichever comes first.
type countingBody struct {
	io.ReadCloser
	n    *atomic.Int64
	done func()
	once sync.Once
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *countingBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *countingBody) end() {
	if b.done != nil {
		b.once.Do(b.done)
	}
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

// listScope is what a list request reads: a resource in a namespace
// (empty: cluster-wide), and whether it asks for a further page.
type listScope struct {
	resource, namespace string
	page                bool
}

// listScopeOf returns the scope of a list request (see verbOf).
func listScopeOf(r *http.Request) listScope {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	}
	var l listScope
	if len(parts) >= 3 && parts[0] == "namespaces" {
		l.namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		l.resource = parts[0]
	}
	l.page = r.URL.Query().Get("continue") != ""
	return l
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
