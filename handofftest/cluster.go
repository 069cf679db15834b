package handofftest

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Actors the cluster itself writes as. They appear in [Write.Actor].
const (
	// GCActor is the actor of writes made by the simulated garbage
	// collector: deletion of dependents, removal of dangling owner
	// references and of the foregroundDeletion and orphan finalizers.
	GCActor = "garbage-collector"
	// SeedActor is the actor of objects stored with [Cluster.Add].
	SeedActor = "seed"
)

// Finalizers the cluster interprets, as the real garbage collector does.
const (
	// FinalizerForeground is added by a delete with Foreground propagation
	// and removed once no blocking dependent remains.
	FinalizerForeground = "foregroundDeletion"
	// FinalizerOrphan makes the garbage collector drop owner references to
	// a deleting object from its dependents, then the finalizer itself.
	FinalizerOrphan = "orphan"
)

// Key identifies an object independently of its API version: GroupKind,
// namespace and name, the same identity as handoff.Ref.
type Key struct {
	// Group and Kind, without the version: v1beta1 and v1 are one key.
	Group string
	Kind  string
	// Namespace is empty for cluster-scoped objects.
	Namespace string
	Name      string
}

// KeyOf returns the key of an object from its apiVersion, kind, namespace
// and name.
func KeyOf(u *unstructured.Unstructured) Key {
	gvk := u.GroupVersionKind()
	return Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// String renders the key as "group/Kind namespace/name", leaving out an
// empty group or namespace.
func (k Key) String() string {
	var b strings.Builder
	if k.Group != "" {
		b.WriteString(k.Group)
		b.WriteByte('/')
	}
	b.WriteString(k.Kind)
	b.WriteByte(' ')
	if k.Namespace != "" {
		b.WriteString(k.Namespace)
		b.WriteByte('/')
	}
	b.WriteString(k.Name)
	return b.String()
}

// Option configures [NewCluster].
type Option func(*Cluster)

// WithClock sets the time of the fake clock and the step it advances by
// on every API call. The defaults are 2025-01-01T00:00:00Z and one second
// (timestamps in object metadata have a resolution of one second).
func WithClock(start time.Time, step time.Duration) Option {
	return func(c *Cluster) {
		c.now = start.UTC()
		c.step = step
	}
}

// WithSeed seeds the random suffixes given to names created from
// metadata.generateName. The default seed is 1.
func WithSeed(seed int64) Option {
	return func(c *Cluster) { c.rand = rand.New(rand.NewSource(seed)) }
}

// WithoutAutoGC stops the cluster from collecting garbage after every
// write; call [Cluster.CollectGarbage] to run a pass.
func WithoutAutoGC() Option {
	return func(c *Cluster) { c.autoGC = false }
}

// RequireNamespaces makes the cluster admit namespaced objects as a real
// API server's NamespaceLifecycle admission does: a create (or an
// [Cluster.Add]) of a namespaced object fails with 404 NotFound,
// namespaces "x" not found, unless a Namespace x is stored, and with 403
// Forbidden, "unable to create new content in namespace x because it is
// being terminated" (cause NamespaceTerminating), while that Namespace is
// being deleted. existing are the names of Namespaces the cluster starts
// with, stored once every option is applied as by [Cluster.Add]; a real
// cluster has default, kube-system, kube-public and kube-node-lease, this
// one none but these. Without the option (the default) any namespace
// goes, as with dynamic/fake. The cluster runs no namespace controller:
// deleting a Namespace deletes nothing in it, and a Namespace with no
// finalizers goes at once; give it one for it to stay terminating.
func RequireNamespaces(existing ...string) Option {
	return func(c *Cluster) {
		c.requireNS = true
		c.initialNS = append(c.initialNS, existing...)
	}
}

// kindInfo is what the cluster knows of a registered resource.
type kindInfo struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

func (k kindInfo) gvk() schema.GroupVersionKind { return k.gvr.GroupVersion().WithKind(k.kind) }

func (k kindInfo) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: k.gvr.Group, Kind: k.kind}
}

// Cluster is a fake API server holding objects in memory. It serves them
// through real [dynamic.Interface] clients, keeps a fake clock, records
// the lifetime of every object and every write, and injects faults. A
// Cluster is safe for use by several goroutines at once.
type Cluster struct {
	mu sync.Mutex

	kinds map[schema.GroupVersionResource]kindInfo
	byGK  map[schema.GroupKind]kindInfo
	order []schema.GroupVersionResource // registration order, for Mapper
	known meta.RESTMapper               // the kinds registered now; nil after a Register

	objects map[Key]*unstructured.Unstructured
	rv      int64
	uids    int64
	now     time.Time
	step    time.Duration
	rand    *rand.Rand
	autoGC  bool

	requireNS bool     // RequireNamespaces
	initialNS []string // the Namespaces RequireNamespaces stores

	timelines map[Key][]Interval
	writes    []Write
	actions   []Action
	calls     map[CallKey]int
	faults    []installedFault

	watchers map[*watcher]struct{} // open watches (watch.go)
	history  int                   // WithWatchHistory
}

// NewCluster returns an empty cluster that serves these built-in kinds,
// each at one version, namespaced unless said otherwise:
//
//   - v1: ConfigMap, Secret, Service, ServiceAccount,
//     PersistentVolumeClaim, and Namespace (cluster-scoped);
//   - apps/v1: Deployment, StatefulSet, DaemonSet;
//   - batch/v1: Job;
//   - rbac.authorization.k8s.io/v1: Role, RoleBinding, and the
//     cluster-scoped ClusterRole and ClusterRoleBinding;
//   - admissionregistration.k8s.io/v1 (cluster-scoped):
//     ValidatingWebhookConfiguration, MutatingWebhookConfiguration;
//   - apiregistration.k8s.io/v1: APIService (cluster-scoped);
//   - apiextensions.k8s.io/v1: CustomResourceDefinition (cluster-scoped);
//   - policy/v1: PodDisruptionBudget;
//   - autoscaling/v2: HorizontalPodAutoscaler.
//
// Their resources are the lower-case plurals (configmaps, deployments,
// customresourcedefinitions, …). Any other kind, a custom resource
// included, is served once registered ([Cluster.Register]); a built-in
// kind can be served at more versions ([Cluster.AddVersion]) or not at
// all ([Cluster.Unregister]).
func NewCluster(opts ...Option) *Cluster {
	c := &Cluster{
		kinds:     map[schema.GroupVersionResource]kindInfo{},
		byGK:      map[schema.GroupKind]kindInfo{},
		objects:   map[Key]*unstructured.Unstructured{},
		now:       time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		step:      time.Second,
		rand:      rand.New(rand.NewSource(1)),
		autoGC:    true,
		timelines: map[Key][]Interval{},
		calls:     map[CallKey]int{},
		history:   DefaultWatchHistory,
	}
	for _, k := range builtinKinds {
		c.Register(k.gvr, k.kind, k.namespaced)
	}
	for _, o := range opts {
		o(c)
	}
	if len(c.initialNS) > 0 {
		nss := make([]*unstructured.Unstructured, 0, len(c.initialNS))
		for i, name := range c.initialNS {
			if slices.Contains(c.initialNS[:i], name) {
				continue
			}
			ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
			ns.SetName(name)
			nss = append(nss, ns)
		}
		if err := c.Add(nss...); err != nil {
			panic(fmt.Sprintf("handofftest: RequireNamespaces: %v", err)) // Add refuses only a name given twice
		}
	}
	return c
}

var builtinKinds = []kindInfo{
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "ServiceAccount", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "Namespace", false},
	{schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "PersistentVolumeClaim", true},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", true},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, "StatefulSet", true},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, "DaemonSet", true},
	{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "Job", true},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, "Role", true},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, "RoleBinding", true},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, "ClusterRole", false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, "ClusterRoleBinding", false},
	{schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, "ValidatingWebhookConfiguration", false},
	{schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}, "MutatingWebhookConfiguration", false},
	{schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}, "APIService", false},
	{schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "CustomResourceDefinition", false},
	{schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, "PodDisruptionBudget", true},
	{schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, "HorizontalPodAutoscaler", true},
}

// Register makes the cluster serve a resource: gvr is what clients
// address, kind its Kind and namespaced its scope. Calls for resources
// that were not registered fail with NotFound. Registering a GroupKind
// again replaces the earlier registration, every version of it
// ([Cluster.AddVersion]).
func (c *Cluster) Register(gvr schema.GroupVersionResource, kind string, namespaced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := kindInfo{gvr: gvr, kind: kind, namespaced: namespaced}
	var displaced []schema.GroupKind
	for g, old := range c.kinds {
		if old.groupKind() == k.groupKind() {
			delete(c.kinds, g)
		} else if g == gvr {
			delete(c.kinds, g)
			displaced = append(displaced, old.groupKind())
		}
	}
	if !slices.Contains(c.order, gvr) {
		c.order = append(c.order, gvr)
	}
	c.kinds[gvr] = k
	c.byGK[k.groupKind()] = k
	for _, gk := range displaced {
		c.prefer(gk)
	}
	c.known = nil
}

// AddVersion makes the cluster serve a kind it already serves at one more
// version: gvr names the kind by its group and resource, as registered,
// and the version to add. The versions registered first stay preferred:
// a REST mapping asked for without a version gets the first, and objects
// are stored at it. A client may address the kind at any version it is
// served at; objects come back at the version asked for, as a real API
// server converts them. It fails if no kind is registered for gvr's group
// and resource.
func (c *Cluster) AddVersion(gvr schema.GroupVersionResource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.kinds[gvr]; ok {
		return nil
	}
	for _, k := range c.kinds {
		if k.gvr.Group == gvr.Group && k.gvr.Resource == gvr.Resource {
			c.kinds[gvr] = kindInfo{gvr: gvr, kind: k.kind, namespaced: k.namespaced}
			c.order = append(slices.DeleteFunc(c.order, func(g schema.GroupVersionResource) bool { return g == gvr }), gvr)
			c.known = nil
			return nil
		}
	}
	return fmt.Errorf("handofftest: add version %s: no kind is registered for %s", gvr.Version, gvr.GroupResource())
}

// Unregister stops serving a resource at gvr's version, as a cluster does
// once a CustomResourceDefinition is deleted, or after an upgrade that
// removes an API version. If the kind is served at other versions, the
// first of them becomes preferred; otherwise the kind is no longer served:
// calls for it fail with NotFound and [Cluster.Mapper] does not know it.
// Objects of the kind stay stored (and are served again if the kind is
// registered again): a test that deletes a CRD deletes its objects first,
// as the API server does.
func (c *Cluster) Unregister(gvr schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.kinds[gvr]
	if !ok {
		return
	}
	delete(c.kinds, gvr)
	c.order = slices.DeleteFunc(c.order, func(g schema.GroupVersionResource) bool { return g == gvr })
	c.prefer(k.groupKind())
	c.known = nil
}

// prefer makes the first served version of gk in registration order its
// preferred one, or forgets gk when it is served at none.
func (c *Cluster) prefer(gk schema.GroupKind) {
	for _, g := range c.order {
		if k, ok := c.kinds[g]; ok && k.groupKind() == gk {
			c.byGK[gk] = k
			return
		}
	}
	delete(c.byGK, gk)
}

// storage returns the registration objects of k's kind are stored at.
func (c *Cluster) storage(k kindInfo) kindInfo {
	if s, ok := c.byGK[k.groupKind()]; ok {
		return s
	}
	return k
}

// as returns obj at the version of k, the version a client asked for.
func as(k kindInfo, obj *unstructured.Unstructured) *unstructured.Unstructured {
	if obj != nil {
		obj.SetAPIVersion(k.gvr.GroupVersion().String())
	}
	return obj
}

// Dynamic returns a client whose calls are attributed to the empty actor.
func (c *Cluster) Dynamic() dynamic.Interface { return c.ClientFor("") }

// ClientFor returns a client whose calls and writes are attributed to
// actor, so that each simulated component can be told apart in
// [Cluster.Writes], [Cluster.Actions] and [Cluster.Calls], and be given
// its own faults.
func (c *Cluster) ClientFor(actor string) dynamic.Interface {
	return &client{c: c, actor: actor}
}

// Now returns the time of the fake clock.
func (c *Cluster) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Tick advances the fake clock by one step and returns the new time. Every
// API call does this before it takes effect.
func (c *Cluster) Tick() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tick()
}

func (c *Cluster) tick() time.Time {
	c.now = c.now.Add(c.step)
	return c.now
}

// Add stores objects as they are, bypassing faults, as fixtures: each must
// be of a registered kind and have a name; it keeps its metadata.uid,
// creationTimestamp, generation, deletionTimestamp and status when they
// are set (a deletionTimestamp needs finalizers), otherwise they are
// assigned as on create. Add advances the clock by one step and records
// the objects as created by [SeedActor]; it runs no garbage collection.
func (c *Cluster) Add(objs ...*unstructured.Unstructured) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.tick()
	for _, in := range objs {
		if err := c.seed(in, now); err != nil {
			return err
		}
	}
	return nil
}

// Get returns a copy of the stored object with the given key.
func (c *Cluster) Get(key Key) (*unstructured.Unstructured, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.objects[key]
	if !ok {
		return nil, false
	}
	return o.DeepCopy(), true
}

// Exists reports whether an object with the given key is stored now,
// whether or not it is being deleted.
func (c *Cluster) Exists(key Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.objects[key]
	return ok
}

// Objects returns copies of all stored objects, sorted by key.
func (c *Cluster) Objects() []*unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*unstructured.Unstructured, 0, len(c.objects))
	for _, k := range c.sortedKeys() {
		out = append(out, c.objects[k].DeepCopy())
	}
	return out
}

func (c *Cluster) sortedKeys() []Key {
	keys := make([]Key, 0, len(c.objects))
	for k := range c.objects {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	return keys
}

func keyLess(a, b Key) bool {
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func (c *Cluster) nextRV() string {
	c.rv++
	return fmt.Sprint(c.rv)
}

func (c *Cluster) nextUID() string {
	c.uids++
	return fmt.Sprintf("00000000-0000-0000-0000-%012d", c.uids)
}
