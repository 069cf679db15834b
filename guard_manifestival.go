package handoff

import (
	"sync"

	mf "github.com/manifestival/manifestival"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ManifestivalGuard is the coexistence [Guard] of one set in the shapes a
// set controller that applies with manifestival uses: a manifest filter
// ([ManifestivalGuard.MayApply]), a transformer ([ManifestivalGuard.Stamp])
// and an mf.Client ([ManifestivalGuard.Client]) that asks
// [Guard.MayWrite] of every live object manifestival reads and drops the
// update of one it refuses. Make one for each pass over a set:
//
//	g := handoff.ManifestivalGuard{Guard: handoff.NewGuard(set, family), ClusterScoped: fam.ClusterScoped}
//	m, err := mf.ManifestFrom(mf.Slice(objs), mf.UseClient(g.Client(client)))
//	m, err = m.Filter(g.MayApply).Transform(owner, g.Stamp) // Stamp last
//	err = m.Apply()
//
// An object left alone is not deleted, only not written: a newer
// generation's set writes it.
type ManifestivalGuard struct {
	// Guard is the set's guard ([NewGuard]).
	Guard Guard
	// ClusterScoped tells the kinds whose objects have no namespace
	// although a manifest gives them one (operators put the target
	// namespace on every object; a cluster-scoped custom kind keeps it
	// there), so that they are asked about under the identity the family
	// reads them with ([Family.ClusterScoped]). Nil means
	// [WellKnownClusterScoped].
	ClusterScoped func(schema.GroupKind) bool
	// Skipped, if set, is told of every object left alone, with the
	// guard's reason: for a log line.
	Skipped func(u *unstructured.Unstructured, reason string)
}

// ref is the identity of u as the family reads it.
func (g ManifestivalGuard) ref(u *unstructured.Unstructured) Ref {
	r := RefOf(u)
	scoped := g.ClusterScoped
	if scoped == nil {
		scoped = WellKnownClusterScoped
	}
	if r.Namespace != "" && scoped(r.GroupKind()) {
		r.Namespace = ""
	}
	return r
}

func (g ManifestivalGuard) skip(u *unstructured.Unstructured, reason string) {
	if g.Skipped != nil {
		g.Skipped(u, reason)
	}
}

// MayApply is an mf.Predicate: it keeps what [Guard.MayApply] allows.
func (g ManifestivalGuard) MayApply(u *unstructured.Unstructured) bool {
	ok, reason := g.Guard.MayApply(g.ref(u))
	if !ok {
		g.skip(u, reason)
	}
	return ok
}

// Stamp is an mf.Transformer: it marks u with the set's writer stamp
// ([Guard.Stamp]). Put it after every transformer that sets annotations.
func (g ManifestivalGuard) Stamp(u *unstructured.Unstructured) error {
	g.Guard.Stamp(u)
	return nil
}

// Client wraps c for one pass: Get asks [Guard.MayWrite] of the live
// object it returns, and the Update manifestival then makes of an object
// the guard refused is dropped (told to Skipped); a Create of what
// [Guard.MayApply] refuses is dropped too. Everything else goes to c. The
// verdicts are kept per object for the life of the client, so make a new
// one for each pass.
func (g ManifestivalGuard) Client(c mf.Client) mf.Client {
	return &guardedClient{Client: c, g: g, refused: map[Ref]string{}}
}

type guardedClient struct {
	mf.Client
	g       ManifestivalGuard
	mu      sync.Mutex
	refused map[Ref]string // the objects MayWrite refused, with its reason
}

func (c *guardedClient) Get(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := c.Client.Get(u)
	if err != nil || live == nil {
		return live, err
	}
	ok, reason := c.g.Guard.MayWrite(live)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		delete(c.refused, c.g.ref(u))
	} else {
		c.refused[c.g.ref(u)] = reason
	}
	return live, nil
}

func (c *guardedClient) Update(u *unstructured.Unstructured, opts ...mf.ApplyOption) error {
	c.mu.Lock()
	reason, refused := c.refused[c.g.ref(u)]
	c.mu.Unlock()
	if refused {
		c.g.skip(u, reason)
		return nil
	}
	return c.Client.Update(u, opts...)
}

func (c *guardedClient) Create(u *unstructured.Unstructured, opts ...mf.ApplyOption) error {
	if ok, reason := c.g.Guard.MayApply(c.g.ref(u)); !ok {
		c.g.skip(u, reason)
		return nil
	}
	return c.Client.Create(u, opts...)
}
