package handofftest

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Mapper returns a REST mapper of the kinds the cluster serves, with their
// scope; a mapping asked for without a version gets the registered one. It
// stays current: a kind registered later is known to it from then on, as to
// a mapper that discovers on every miss. It is a
// [meta.ResettableRESTMapper] whose Reset does nothing, so the library
// takes a kind it does not know for a kind the cluster does not serve (see
// handoff.ErrNotServed). For a mapper that goes stale, use
// [Cluster.CachedMapper].
func (c *Cluster) Mapper() meta.ResettableRESTMapper { return liveMapper{c: c} }

// CachedMapper returns a REST mapper that behaves like client-go's
// DeferredDiscoveryRESTMapper over a memory-cached discovery client
// (memory.NewMemCacheClient): on first use it reads the kinds the cluster
// serves and keeps that snapshot, so a kind registered afterwards (a CRD
// served later) is unknown to it, a NoMatch error, until Reset, after which
// the next use reads the kinds again. It is what a stale-mapper test hands
// the executor. It is safe for concurrent use.
func (c *Cluster) CachedMapper() meta.ResettableRESTMapper { return &cachedMapper{c: c} }

// current returns a mapper of the kinds registered now, building it on the
// first call after a Register.
func (c *Cluster) current() meta.RESTMapper {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known != nil {
		return c.known
	}
	var gvs []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, gvr := range c.order {
		if gv := gvr.GroupVersion(); !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for _, gvr := range c.order {
		k, ok := c.kinds[gvr]
		if !ok {
			continue
		}
		scope := meta.RESTScopeRoot
		if k.namespaced {
			scope = meta.RESTScopeNamespace
		}
		singular := gvr.GroupVersion().WithResource(strings.ToLower(k.kind))
		m.AddSpecific(k.gvk(), gvr, singular, scope)
	}
	c.known = m
	return m
}

// liveMapper asks the cluster's current kinds on every call.
type liveMapper struct{ c *Cluster }

var _ meta.ResettableRESTMapper = liveMapper{}

func (m liveMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.c.current().KindFor(r)
}

func (m liveMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return m.c.current().KindsFor(r)
}

func (m liveMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return m.c.current().ResourceFor(r)
}

func (m liveMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return m.c.current().ResourcesFor(r)
}

func (m liveMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return m.c.current().RESTMapping(gk, versions...)
}

func (m liveMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return m.c.current().RESTMappings(gk, versions...)
}

func (m liveMapper) ResourceSingularizer(resource string) (string, error) {
	return m.c.current().ResourceSingularizer(resource)
}

// Reset does nothing: the mapper is always current.
func (liveMapper) Reset() {}

// cachedMapper keeps the kinds of its first use until Reset.
type cachedMapper struct {
	c    *Cluster
	mu   sync.Mutex
	snap meta.RESTMapper
}

var _ meta.ResettableRESTMapper = (*cachedMapper)(nil)

func (m *cachedMapper) get() meta.RESTMapper {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap == nil {
		m.snap = m.c.current()
	}
	return m.snap
}

func (m *cachedMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.get().KindFor(r)
}

func (m *cachedMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return m.get().KindsFor(r)
}

func (m *cachedMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return m.get().ResourceFor(r)
}

func (m *cachedMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return m.get().ResourcesFor(r)
}

func (m *cachedMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return m.get().RESTMapping(gk, versions...)
}

func (m *cachedMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return m.get().RESTMappings(gk, versions...)
}

func (m *cachedMapper) ResourceSingularizer(resource string) (string, error) {
	return m.get().ResourceSingularizer(resource)
}

// Reset drops the snapshot; the next use reads the cluster's kinds again.
func (m *cachedMapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snap = nil
}
