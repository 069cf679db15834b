package handofftest

import (
	"fmt"
	"math/rand"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Call is an API call as a [FaultFunc] sees it, before it takes effect.
type Call struct {
	// Actor is the actor of the client making the call.
	Actor string
	// Verb is get, list, create, update, patch, delete, deletecollection,
	// watch or apply.
	Verb string
	// Resource is the resource the client addressed.
	Resource schema.GroupVersionResource
	// Subresource is "status" for a status call, otherwise empty.
	Subresource string
	// Namespace is the request's namespace; empty for cluster-scoped
	// resources and for lists across all namespaces.
	Namespace string
	// Name is the object's name; for a create, metadata.name (empty when
	// the server is to generate it); empty for list and deletecollection.
	Name string
	// Metadata is true for a call of a client from [Cluster.MetadataFor],
	// which is answered with metadata alone.
	Metadata bool
}

// String renders the call for a log line or an error message.
func (c Call) String() string {
	s := c.Verb + " " + c.Resource.Resource
	if c.Resource.Group != "" {
		s += "." + c.Resource.Group
	}
	if c.Subresource != "" {
		s += "/" + c.Subresource
	}
	if c.Namespace != "" {
		s += " " + c.Namespace + "/" + c.Name
	} else if c.Name != "" {
		s += " " + c.Name
	}
	return s
}

func (c Call) isWrite() bool {
	switch c.Verb {
	case "get", "list", "watch":
		return false
	}
	return true
}

// Mode says when an injected error hits a call.
type Mode int

const (
	// BeforeCommit fails the call before it takes effect.
	BeforeCommit Mode = iota
	// AfterCommit lets the call take effect, then returns the error in
	// place of its response, as when a response is lost.
	AfterCommit
)

// String returns "before-commit" or "after-commit".
func (m Mode) String() string {
	if m == AfterCommit {
		return "after-commit"
	}
	return "before-commit"
}

// Fault is what a [FaultFunc] decides for a call. The zero Fault (a nil
// Err) lets the call through.
type Fault struct {
	// Mode says whether the call fails before or after it takes effect.
	Mode Mode
	// Err is returned to the caller; nil means no fault.
	Err error
}

// FaultFunc decides whether a call fails. It is called without the
// cluster's lock held and may be called from several goroutines at once;
// it must not make API calls through the cluster's clients.
type FaultFunc func(Call) Fault

type installedFault struct {
	f      FaultFunc
	actors map[string]bool // nil: every actor
}

// InjectFaults installs f for the calls of the given actors, or of every
// actor when none is given. Every installed FaultFunc whose actors match
// is consulted on each call, in installation order; the first Fault with
// an error wins. Calls of the garbage collector and [Cluster.Add] are not
// subject to faults.
func (c *Cluster) InjectFaults(f FaultFunc, actors ...string) {
	in := installedFault{f: f}
	if len(actors) > 0 {
		in.actors = map[string]bool{}
		for _, a := range actors {
			in.actors[a] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, in)
}

// DisableFaults removes every installed FaultFunc.
func (c *Cluster) DisableFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = nil
}

// consult asks the installed faults about call; it must be called without
// c.mu held.
func (c *Cluster) consult(call Call) Fault {
	c.mu.Lock()
	faults := append([]installedFault(nil), c.faults...)
	c.mu.Unlock()
	var out Fault
	for _, in := range faults {
		if in.actors != nil && !in.actors[call.Actor] {
			continue
		}
		if f := in.f(call); f.Err != nil && out.Err == nil {
			out = f
		}
	}
	return out
}

// FailNth fails the nth call (counting from 1) it is consulted on, once,
// with err in the given mode. Installed for one actor it counts that
// actor's calls, installed for all it counts all calls. A nil err means an
// internal server error.
func FailNth(n int, mode Mode, err error) FaultFunc {
	var mu sync.Mutex
	seen := 0
	return func(call Call) Fault {
		mu.Lock()
		seen++
		hit := seen == n
		mu.Unlock()
		if !hit {
			return Fault{}
		}
		if err == nil {
			err = FaultServerError.errorFor(call)
		}
		return Fault{Mode: mode, Err: err}
	}
}

// FaultKind is a kind of fault [RandomFaults] injects.
type FaultKind string

// Fault kinds.
const (
	// FaultServerError fails a call before commit with 500 InternalError.
	FaultServerError FaultKind = "server-error"
	// FaultConflict fails a write (not a create) before commit with 409
	// Conflict.
	FaultConflict FaultKind = "conflict"
	// FaultTooManyRequests fails a call before commit with 429
	// TooManyRequests.
	FaultTooManyRequests FaultKind = "too-many-requests"
	// FaultTimeoutAfterCommit lets a call take effect and returns 504
	// Timeout in place of its response.
	FaultTimeoutAfterCommit FaultKind = "timeout-after-commit"
)

// AllFaultKinds lists every FaultKind.
var AllFaultKinds = []FaultKind{FaultServerError, FaultConflict, FaultTooManyRequests, FaultTimeoutAfterCommit}

// errorFor returns the error of kind k for call.
func (k FaultKind) errorFor(call Call) error {
	cause := fmt.Errorf("handofftest: injected %s on %s", k, call)
	switch k {
	case FaultConflict:
		return apierrors.NewConflict(call.Resource.GroupResource(), call.Name, cause)
	case FaultTooManyRequests:
		return apierrors.NewTooManyRequests(cause.Error(), 1)
	case FaultTimeoutAfterCommit:
		return apierrors.NewTimeoutError(cause.Error(), 0)
	default:
		return apierrors.NewInternalError(cause)
	}
}

func (k FaultKind) mode() Mode {
	if k == FaultTimeoutAfterCommit {
		return AfterCommit
	}
	return BeforeCommit
}

func (k FaultKind) appliesTo(call Call) bool {
	if k == FaultConflict {
		return call.isWrite() && call.Verb != "create"
	}
	return true
}

// RandomFaults fails each call it is consulted on with probability rate,
// with one of kinds (all of [AllFaultKinds] when none is given) chosen at
// random among those that apply to the call: reads fail too, except with
// conflicts. The same seed gives the same faults for the same sequence of
// calls.
func RandomFaults(seed int64, rate float64, kinds ...FaultKind) FaultFunc {
	if len(kinds) == 0 {
		kinds = AllFaultKinds
	}
	var mu sync.Mutex
	r := rand.New(rand.NewSource(seed))
	return func(call Call) Fault {
		var fit []FaultKind
		for _, k := range kinds {
			if k.appliesTo(call) {
				fit = append(fit, k)
			}
		}
		mu.Lock()
		hit := r.Float64() < rate
		pick := r.Intn(len(kinds))
		mu.Unlock()
		if !hit || len(fit) == 0 {
			return Fault{}
		}
		k := fit[pick%len(fit)]
		return Fault{Mode: k.mode(), Err: k.errorFor(call)}
	}
}
