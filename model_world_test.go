package handoff_test

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// This file holds the world the model test drives: a fake cluster, the
// component's catalog of generations, 1-4 executors and a set controller,
// the REST mappers they use, and a scheduler that interleaves them one API
// call at a time.

// The component's labels and annotations, as tektoncd/operator writes them.
const (
	mCreatedBy  = "operator.tekton.dev/created-by"
	mType       = "operator.tekton.dev/type"
	mGeneration = "operator.tekton.dev/release-version"
	mHash       = "operator.tekton.dev/last-applied-hash"
	mTargetNS   = "operator.tekton.dev/target-namespace"
	mFinalizer  = "tektoninstallersets.operator.tekton.dev"
	mPrefix     = "pipeline-main-"
	mSetGroup   = "operator.tekton.dev"
	mSetKind    = "TektonInstallerSet"
)

var mSetGVR = schema.GroupVersionResource{Group: mSetGroup, Version: "v1alpha1", Resource: "tektoninstallersets"}

// mRoles are the roles in dependency order: deployment and statefulset wait
// for static.
var mRoles = []string{"static", "deployment", "statefulset"}

// mKind is what the model knows of a kind: its resource and its true
// scope. The model never asks the library or a mapper for a scope.
type mKind struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	// crd names the CustomResourceDefinition whose creation makes the
	// cluster serve the kind; empty for built-in kinds.
	crd string
}

func (k mKind) gk() schema.GroupKind { return schema.GroupKind{Group: k.gvr.Group, Kind: k.kind} }

func (k mKind) apiVersion() string { return k.gvr.GroupVersion().String() }

var (
	kConfigMap   = mKind{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", namespaced: true}
	kSA          = mKind{gvr: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, kind: "ServiceAccount", namespaced: true}
	kService     = mKind{gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, kind: "Service", namespaced: true}
	kPVC         = mKind{gvr: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, kind: "PersistentVolumeClaim", namespaced: true}
	kNamespace   = mKind{gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, kind: "Namespace"}
	kDeployment  = mKind{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, kind: "Deployment", namespaced: true}
	kStatefulSet = mKind{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, kind: "StatefulSet", namespaced: true}
	kClusterRole = mKind{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, kind: "ClusterRole"}
	kWebhook     = mKind{gvr: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, kind: "ValidatingWebhookConfiguration"}
	kAPIService  = mKind{gvr: schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}, kind: "APIService"}
	kCRD         = mKind{gvr: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, kind: "CustomResourceDefinition"}
	// Tekton Triggers' kinds, served only once their CRDs exist: a
	// cluster-scoped one, listed without a namespace, and a namespaced one.
	kInterceptor = mKind{gvr: schema.GroupVersionResource{Group: "triggers.tekton.dev", Version: "v1alpha1", Resource: "clusterinterceptors"}, kind: "ClusterInterceptor", crd: "clusterinterceptors.triggers.tekton.dev"}
	kListener    = mKind{gvr: schema.GroupVersionResource{Group: "triggers.tekton.dev", Version: "v1beta1", Resource: "eventlisteners"}, kind: "EventListener", namespaced: true, crd: "eventlisteners.triggers.tekton.dev"}
	kSet         = mKind{gvr: mSetGVR, kind: mSetKind}
	// A HorizontalPodAutoscaler, which old generations list at
	// autoscaling/v2beta2 and newer ones at autoscaling/v2, and
	// cert-manager's Certificate, a kind the cluster serves only while
	// cert-manager is installed.
	kHPA  = mKind{gvr: schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, kind: "HorizontalPodAutoscaler", namespaced: true}
	kCert = mKind{gvr: schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}, kind: "Certificate", namespaced: true, crd: "certificates.cert-manager.io"}
	// The Prometheus operator's ServiceMonitor: an optional kind the set
	// controller leaves out while the cluster does not serve it.
	kMonitor = mKind{gvr: schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}, kind: "ServiceMonitor", namespaced: true, crd: "servicemonitors.monitoring.coreos.com"}
)

// mKinds is every kind the model uses.
var mKinds = []mKind{kConfigMap, kSA, kService, kPVC, kNamespace, kDeployment, kStatefulSet, kClusterRole, kWebhook, kAPIService, kCRD, kInterceptor, kListener, kSet, kHPA, kCert, kMonitor}

// mOldVersions are the API versions that older generations list and a
// cluster may no longer serve (Kubernetes 1.22 and 1.26 removed them).
var mOldVersions = []schema.GroupVersionResource{
	{Group: "autoscaling", Version: "v2beta2", Resource: "horizontalpodautoscalers"},
	{Group: "admissionregistration.k8s.io", Version: "v1beta1", Resource: "validatingwebhookconfigurations"},
}

func mKindOf(gk schema.GroupKind) (mKind, bool) {
	for _, k := range mKinds {
		if k.gk() == gk {
			return k, true
		}
	}
	return mKind{}, false
}

// mProtected are the kinds finalization must never delete; mKeep marks a
// resource to keep. Both are stated here, not read from the library.
var mProtected = map[schema.GroupKind]bool{kPVC.gk(): true, kNamespace.gk(): true, kCRD.gk(): true}

const mKeep = "handoff.kube-handoff.io/on-remove"

// mUnowned are the kinds the set controller installs without an owner, as
// tektoncd/operator's injectOwner transformer does: CRDs, Namespaces and
// admission webhook configurations; and ClusterRoles, as knative/operator
// installs every cluster-scoped object, so that the executor deletes RBAC
// objects itself (see the order check). Everything else, PVCs and
// APIServices included, is owned by its set.
var mUnowned = []schema.GroupKind{kCRD.gk(), kNamespace.gk(), kWebhook.gk(), {Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, kClusterRole.gk()}

// mPrune are the executors' prune options: the library's defaults, and
// ClusterRoles installed without an owner (see mUnowned).
func mPrune() handoff.PruneOptions {
	o := handoff.DefaultPruneOptions()
	o.Unowned = append(o.Unowned, kClusterRole.gk())
	return o
}

// Target namespaces a generation may install into, and one no generation
// uses, for decoys.
const (
	nsA     = "tekton-pipelines"
	nsB     = "tekton-operator"
	nsOther = "user-apps"
)

// mGens is the number of generations in the catalog: v1 … v4.
const mGens = 4

func genName(g int) string { return "v" + strconv.Itoa(g+1) }

// genTraits say how one generation of the catalog differs from the others.
type genTraits struct {
	// NS is the target namespace.
	NS string
	// Triggers: the generation installs Tekton Triggers' CRDs and objects
	// of both custom kinds.
	Triggers bool
}

// modelConfig is what a seed fixes for the whole walk.
type modelConfig struct {
	Gens [mGens]genTraits
	// GCLag: the garbage collector runs only when an operation says so.
	GCLag bool
	// Cache: the executors read the family from a cache that serves one of
	// the controller's last four lists of it (Executor.Cache), as an
	// informer that lags; only the final convergence reads it fresh.
	Cache bool
	// Background: the executor retires sets with Background propagation,
	// the default. Every seed uses it: with Foreground the garbage
	// collector deletes a retiring set's dependents before its finalizer
	// runs, so an object a racing controller pass creates for the set after
	// the executor's handover (a PVC, a keep-annotated ConfigMap) is lost;
	// Executor.Propagation says so.
	Background bool
	// ReadyAfter is the controller's passes to Ready.
	ReadyAfter int
	// Executors is how many executors may race.
	Executors int
	// Concurrency is the executors' Executor.Concurrency: above 1, a
	// Step's marks, creates and set deletes of one kind go out together,
	// in an order the Go scheduler picks, so a replay of the walk (to
	// shrink it) may order them otherwise. Odd seeds use 3, even ones 1,
	// drawn apart from the seed's random walk, which it leaves as it was.
	Concurrency int
	// Metadata: the executors have a metadata client (Executor.Metadata),
	// so a cache's plan is confirmed from the family's metadata and the
	// resources a retirement or Finalize reads are listed with metadata
	// alone. Seeds whose second bit is set use it, drawn apart from the
	// walk as Concurrency is.
	Metadata bool
	// FreshMapper: the executors' REST mapper learns a kind as soon as
	// its CRD exists; otherwise it is a discovery cache filled when the
	// operator starts, stale once a CRD appears, until Reset.
	FreshMapper bool
	// Objects is how the executors, and the controller's finalizer, reach
	// the resources sets list (Executor.Objects).
	Objects objectsMode
	// OldAPIs says whether the cluster serves the old API versions
	// (mOldVersions) that older generations list.
	OldAPIs oldAPIs
	// CertManager: cert-manager is installed when the walk starts (admin
	// operations install and uninstall it).
	CertManager bool
	// Second: another component (Tekton Triggers, created-by
	// TektonTrigger) has a family of sets beside the pipelines one, whose
	// set lists objects the pipelines sets list too.
	Second bool
	// Big: a generation grown or moved in place (see shape) lists
	// hundreds of ConfigMaps more, with names of 200 characters, so that
	// the record of what a move drops (DroppedAnnotation) comes near the
	// most the executor writes (128 KiB). One seed in a hundred, drawn apart
	// from the walk as Concurrency is.
	Big bool
}

// shape is what an update in place (opHash) makes of a generation's
// content: hash version h has shape h%4.
type shape int

const (
	// shapeBase: the generation as it is.
	shapeBase shape = iota
	// shapeGrown: the static set lists ConfigMaps more.
	shapeGrown
	// shapeShrunk: the static set no longer lists config-only-<gen> nor
	// only-<gen>.webhook (pruned: one owned by the set, one installed
	// without an owner) nor config-leader-election (the deployment set of
	// v2 on lists it still).
	shapeShrunk
	// shapeMoved: every set of the generation targets the other
	// namespace (tektoncd/operator: a targetNamespace that changed).
	shapeMoved
)

func shapeOf(h int) shape { return shape(h % 4) }

// bigExtras is how many ConfigMaps a Big walk's grown or moved static
// set lists more: with names of 200 characters their references take
// some 120 KiB as JSON.
const bigExtras = 450

// nsAt is the target namespace of generation g at hash version h.
func (c modelConfig) nsAt(g, h int) string {
	ns := c.Gens[g].NS
	if shapeOf(h) == shapeMoved {
		if ns == nsA {
			return nsB
		}
		return nsA
	}
	return ns
}

// objectsMode is how executors reach listed resources.
type objectsMode int

const (
	// objPerCall: Objects nil, so each Step and Finalize makes its own
	// over Dynamic and Mapper (the executor's default).
	objPerCall objectsMode = iota
	// objLongLived: one handoff.NewDynamicObjects per executor, made when
	// the operator starts, over a caching REST mapper of its own
	// (handofftest's Cluster.CachedMapper), as an operator that sets
	// Executor.Objects once.
	objLongLived
	// objManifestival: handoff.ManifestivalObjects over a manifestival
	// client, made for each call as tektoncd/operator's patch does: the
	// version of each kind from the manifests of the retiring set and its
	// successors (ManifestVersions), NotServed: meta.IsNoMatchError.
	objManifestival
)

func (m objectsMode) String() string {
	return [...]string{"per call", "long-lived NewDynamicObjects", "manifestival"}[m]
}

// oldAPIs says which of mOldVersions the cluster serves.
type oldAPIs int

const (
	// oldServed: served throughout.
	oldServed oldAPIs = iota
	// oldGone: never served.
	oldGone
	// oldDropped: served until an operation upgrades the cluster.
	oldDropped
)

func (o oldAPIs) String() string {
	return [...]string{"served", "not served", "served until a cluster upgrade"}[o]
}

func (c modelConfig) String() string {
	var gens []string
	for g, t := range c.Gens {
		s := genName(g) + ":" + t.NS
		if t.Triggers {
			s += "+triggers"
		}
		gens = append(gens, s)
	}
	gc := "instant"
	if c.GCLag {
		gc = "lagging"
	}
	prop := "Foreground"
	if c.Background {
		prop = "Background"
	}
	mapper := "stale"
	if c.FreshMapper {
		mapper = "fresh"
	}
	cache := "none"
	if c.Cache {
		cache = "lagging"
	}
	cm := "not installed"
	if c.CertManager {
		cm = "installed"
	}
	second := "none"
	if c.Second {
		second = "TektonTrigger sharing objects"
	}
	md := "none"
	if c.Metadata {
		md = "metadata client"
	}
	size := "small"
	if c.Big {
		size = fmt.Sprintf("big (%d ConfigMaps more, grown or moved)", bigExtras)
	}
	return fmt.Sprintf("generations [%s], GC %s, retire %s, Ready after %d passes, up to %d executors writing sets %d at a time, executor mapper %s, executor cache %s, "+
		"objects %s, %s, old API versions %s, cert-manager %s, second family %s, sets %s",
		strings.Join(gens, " "), gc, prop, c.ReadyAfter, c.Executors, max(c.Concurrency, 1), mapper, cache, c.Objects, md, c.OldAPIs, cm, second, size)
}

func randomConfig(r *rand.Rand) modelConfig {
	c := modelConfig{GCLag: r.Intn(2) == 0, Background: true, ReadyAfter: 1 + r.Intn(2), Executors: 1 + r.Intn(4)}
	same := r.Intn(3) == 0
	for g := range c.Gens {
		c.Gens[g].NS = nsA
		if !same && r.Intn(2) == 0 {
			c.Gens[g].NS = nsB
		}
		c.Gens[g].Triggers = g > 0 && r.Intn(3) > 0
	}
	c.FreshMapper = r.Intn(4) == 0
	c.Cache = r.Intn(2) == 0
	c.Objects = objectsMode(r.Intn(3))
	c.OldAPIs = oldAPIs(r.Intn(3))
	c.CertManager = r.Intn(2) == 0
	c.Second = r.Intn(2) == 0
	return c
}

// manifest builds one entry of a set's spec.manifests. ns is left out for
// cluster-scoped kinds.
func manifest(k mKind, ns, name string, ann map[string]string, body map[string]any) map[string]any {
	return manifestAt(k, k.gvr.Version, ns, name, ann, body)
}

// manifestAt is manifest at another API version of the kind.
func manifestAt(k mKind, version, ns, name string, ann map[string]string, body map[string]any) map[string]any {
	if !k.namespaced {
		ns = ""
	}
	gv := schema.GroupVersion{Group: k.gvr.Group, Version: version}
	u := handofftest.Object(gv.String(), k.kind, ns, name, map[string]string{"app.kubernetes.io/part-of": "tekton-pipelines"}, body)
	if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	return u.Object
}

// manifests is the catalog: what the set of a role of generation g lists at
// hash version h. Most resources are shared by every generation; some are
// only in one, some in a few; keep-annotated and protected ones come and go.
func (c modelConfig) manifests(g int, role string, h int) []any {
	gen, t := genName(g), c.Gens[g]
	ns := c.nsAt(g, h)
	sh := shapeOf(h)
	data := func(extra ...string) map[string]any {
		d := map[string]any{"version": gen}
		for i := 0; i+1 < len(extra); i += 2 {
			d[extra[i]] = extra[i+1]
		}
		return map[string]any{"data": d}
	}
	var out []any
	add := func(m map[string]any) { out = append(out, m) }
	workloads := func() {
		for _, d := range []string{"controller", "webhook"} {
			add(manifest(kDeployment, ns, "tekton-pipelines-"+d, nil, map[string]any{"spec": map[string]any{"image": d + ":" + gen}}))
		}
		add(manifest(kService, ns, "tekton-pipelines-webhook", nil, map[string]any{"spec": map[string]any{"port": int64(9090)}}))
	}
	switch role {
	case "static":
		add(manifest(kNamespace, "", ns, nil, nil))
		add(manifest(kCRD, "", "tasks.tekton.dev", nil, map[string]any{"spec": map[string]any{"group": "tekton.dev", "version": gen}}))
		if t.Triggers {
			add(manifest(kCRD, "", kInterceptor.crd, nil, map[string]any{"spec": map[string]any{"group": kInterceptor.gvr.Group}}))
			add(manifest(kCRD, "", kListener.crd, nil, map[string]any{"spec": map[string]any{"group": kListener.gvr.Group}}))
		}
		add(manifest(kConfigMap, ns, "config-defaults", nil, data("hash", strconv.Itoa(h))))
		if sh != shapeShrunk {
			add(manifest(kConfigMap, ns, "config-leader-election", nil, data()))
			add(manifest(kConfigMap, ns, "config-only-"+gen, nil, data()))
		}
		if sh == shapeGrown || sh == shapeMoved && c.Big {
			n, pad := 3, ""
			if c.Big {
				n, pad = bigExtras, "-"+strings.Repeat("x", 185)
			}
			for i := 0; i < n; i++ {
				add(manifest(kConfigMap, ns, fmt.Sprintf("config-extra-%03d%s", i, pad), nil, data()))
			}
		}
		if g < 2 {
			add(manifest(kConfigMap, ns, "user-settings", map[string]string{mKeep: handoff.KeepValue}, data()))
		}
		if g%2 == 0 {
			add(manifest(kPVC, ns, "pipeline-cache", nil, map[string]any{"spec": map[string]any{"storage": "1Gi"}}))
		}
		add(manifest(kSA, ns, "tekton-pipelines-controller", nil, nil))
		add(manifest(kClusterRole, "", "tekton-pipelines-controller", nil, map[string]any{"rules": []any{gen}}))
		add(manifest(kClusterRole, "", "tekton-pipelines-only-"+gen, nil, nil))
		// v1 lists its webhook configurations at the old
		// admissionregistration.k8s.io/v1beta1, the others at v1.
		hooks := kWebhook.gvr.Version
		if g == 0 {
			hooks = mOldVersions[1].Version
		}
		add(manifestAt(kWebhook, hooks, "", "validation.webhook.pipeline.tekton.dev", nil, map[string]any{"webhooks": []any{gen}}))
		if sh != shapeShrunk {
			add(manifestAt(kWebhook, hooks, "", "only-"+gen+".webhook.pipeline.tekton.dev", nil, nil))
		}
		// One HPA in every generation: v1 and v2 list it at
		// autoscaling/v2beta2, v3 and v4 at autoscaling/v2.
		hpa := kHPA.gvr.Version
		if g < 2 {
			hpa = mOldVersions[0].Version
		}
		add(manifestAt(kHPA, hpa, ns, "tekton-pipelines-webhook", nil, map[string]any{"spec": map[string]any{"maxReplicas": int64(5)}}))
		// A Certificate in v1 and v3, applied only while cert-manager is
		// installed, and kept when its set goes (its issued secret
		// outlives the component).
		if g%2 == 0 {
			add(manifest(kCert, ns, "tekton-webhook-cert", map[string]string{mKeep: handoff.KeepValue}, map[string]any{"spec": map[string]any{"secretName": "webhook-certs"}}))
		}
		add(manifest(kAPIService, "", "v1beta1.custom.metrics.k8s.io", nil, map[string]any{"spec": map[string]any{"version": gen}}))
		if t.Triggers {
			add(manifest(kInterceptor, "", "core", nil, map[string]any{"spec": map[string]any{"version": gen}}))
			// The EventListener is kept when its set goes.
			add(manifest(kListener, ns, "listener", map[string]string{mKeep: handoff.KeepValue}, map[string]any{"spec": map[string]any{"version": gen}}))
			// What the Triggers component's own set lists too.
			out = append(out, sharedWithTriggers()...)
		}
	case "deployment":
		workloads()
		// A ServiceMonitor of the generation's own, of a kind the cluster
		// serves only in the final convergence (the Prometheus operator is
		// installed then): until then the set controller leaves it out,
		// and a retirement finds its kind not served.
		add(manifest(kMonitor, ns, "tekton-pipelines-"+gen, nil, map[string]any{"spec": map[string]any{"port": "metrics"}}))
		if g > 0 {
			// From v2 on, the deployment set lists a ConfigMap the static
			// set lists too: a resource with two successors.
			add(manifest(kConfigMap, ns, "config-leader-election", nil, data()))
		}
	case "statefulset":
		add(manifest(kStatefulSet, ns, "tekton-pipelines-controller", nil, map[string]any{"spec": map[string]any{"image": gen}}))
		workloads() // the same Deployments and Services as the deployment set
	}
	return out
}

// roleHash is a role's content hash in the catalog.
func roleHash(g int, role string, h int) string { return fmt.Sprintf("%s.%s.h%d", genName(g), role, h) }

func parseRoleHash(s string) (g int, h int, err error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "v") || !strings.HasPrefix(parts[2], "h") {
		return 0, 0, fmt.Errorf("hash %q is not the catalog's", s)
	}
	g, err = strconv.Atoi(parts[0][1:])
	if err != nil {
		return 0, 0, err
	}
	h, err = strconv.Atoi(parts[2][1:])
	return g - 1, h, err
}

// setBody is a set as Build returns it: the manifests and the target
// namespace, which the executor names and labels.
func (c modelConfig) setBody(g int, role string, h int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": mSetGVR.GroupVersion().String(), "kind": mSetKind,
		"spec": map[string]any{"manifests": c.manifests(g, role, h)},
	}}
	u.SetAnnotations(map[string]string{mTargetNS: c.nsAt(g, h)})
	return u
}

// legacyRole is tektoncd/operator's way to tell a set's role from its
// name, which GenerateName made: pipeline-main-<role>-xxxxx.
func legacyRole(u *unstructured.Unstructured) (string, bool) {
	rest, ok := strings.CutPrefix(u.GetName(), mPrefix)
	if !ok {
		return "", false
	}
	for _, r := range mRoles {
		if strings.HasPrefix(rest, r+"-") {
			return r, true
		}
	}
	return "", false
}

func modelFamily() handoff.Family {
	return handoff.Family{
		Resource:        mSetGVR,
		Kind:            mSetKind,
		Selector:        map[string]string{mCreatedBy: "TektonPipeline", mType: "main"},
		GenerationLabel: mGeneration,
		HashAnnotation:  mHash,
		NamePrefix:      mPrefix,
		RoleOf:          legacyRole,
		TargetNamespace: func(u *unstructured.Unstructured) string { return u.GetAnnotations()[mTargetNS] },
	}
}

// modelDesired is the generation the model wants: a generation of the
// catalog, its hash version and whether it has the statefulset role.
type modelDesired struct {
	Gen int
	H   int
	STS bool
}

func (d modelDesired) roles() []string {
	if d.STS {
		return mRoles
	}
	return mRoles[:2]
}

func (d modelDesired) String() string {
	s := genName(d.Gen) + " [" + strings.Join(d.roles(), ",") + "]"
	if d.H > 0 {
		s += fmt.Sprintf(" h%d", d.H)
	}
	return s
}

// desired is the library's form of d.
func (d *modelDesired) desired() *handoff.Desired {
	if d == nil {
		return nil
	}
	out := &handoff.Desired{Generation: genName(d.Gen)}
	for i, r := range d.roles() {
		role := handoff.Role{Name: r, Hash: roleHash(d.Gen, r, d.H)}
		if i > 0 {
			role.After = []string{"static"}
		}
		out.Roles = append(out.Roles, role)
	}
	return out
}

// staleMapper is a REST mapper that behaves like client-go's
// DeferredDiscoveryRESTMapper over a MemCacheClient: it snapshots the kinds
// the cluster serves on first use and keeps them, Fresh forever, so a CRD
// served later is a NoMatch until Reset. The snapshot is copied out of
// Cluster.Mapper(), whatever that mapper does later.
type staleMapper struct {
	c    *handofftest.Cluster
	mu   sync.Mutex
	snap meta.RESTMapper
}

var _ meta.ResettableRESTMapper = (*staleMapper)(nil)

func snapshotMapper(c *handofftest.Cluster) meta.RESTMapper {
	var src meta.RESTMapper = c.Mapper()
	var gvs []schema.GroupVersion
	var found []*meta.RESTMapping
	for _, k := range mKinds {
		m, err := src.RESTMapping(k.gk())
		if err != nil {
			continue
		}
		found = append(found, m)
		gvs = append(gvs, m.GroupVersionKind.GroupVersion())
	}
	out := meta.NewDefaultRESTMapper(gvs)
	for _, m := range found {
		out.AddSpecific(m.GroupVersionKind, m.Resource, m.Resource.GroupVersion().WithResource(strings.ToLower(m.GroupVersionKind.Kind)), m.Scope)
	}
	return out
}

func (m *staleMapper) get() meta.RESTMapper {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap == nil {
		m.snap = snapshotMapper(m.c)
	}
	return m.snap
}

func (m *staleMapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snap = nil
}

func (m *staleMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.get().KindFor(r)
}

func (m *staleMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return m.get().KindsFor(r)
}

func (m *staleMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return m.get().ResourceFor(r)
}

func (m *staleMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return m.get().ResourcesFor(r)
}

func (m *staleMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return m.get().RESTMapping(gk, versions...)
}

func (m *staleMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return m.get().RESTMappings(gk, versions...)
}

func (m *staleMapper) ResourceSingularizer(resource string) (string, error) {
	return m.get().ResourceSingularizer(resource)
}

// freshMapper is the set controller's mapper (and, in some worlds, the
// executors'): the model resets it the moment a CRD makes the cluster serve
// a new kind, so it always knows every served kind.
type freshMapper struct{ staleMapper }

// racer is one participant of a race: an executor, the set controller or
// the garbage collector, each in its own goroutine. It runs only while the
// scheduler has handed it the turn, and gives the turn back before each
// API call, so the interleaving is a function of the scheduler's seed.
type racer struct {
	id     int
	resume chan struct{}
	events chan<- raceEvent
}

type raceEvent struct {
	id    int
	done  bool
	panic any
}

func (r *racer) yield() {
	r.events <- raceEvent{id: r.id}
	<-r.resume
}

// race runs parts, one goroutine each, interleaved at API calls in an
// order drawn from seed. actors[i] are the client actors of part i.
func (w *modelWorld) race(seed int64, actors [][]string, parts []func()) {
	rnd := rand.New(rand.NewSource(seed))
	events := make(chan raceEvent)
	racers := make([]*racer, len(parts))
	w.racers = map[string]*racer{}
	for i := range parts {
		racers[i] = &racer{id: i, resume: make(chan struct{}), events: events}
		for _, a := range actors[i] {
			w.racers[a] = racers[i]
		}
	}
	for i, p := range parts {
		go func() {
			defer func() { events <- raceEvent{id: i, done: true, panic: recover()} }()
			<-racers[i].resume
			p()
		}()
	}
	waiting := make([]int, len(parts))
	for i := range waiting {
		waiting[i] = i
	}
	for len(waiting) > 0 {
		k := rnd.Intn(len(waiting))
		racers[waiting[k]].resume <- struct{}{}
		ev := <-events
		if ev.done {
			waiting = append(waiting[:k], waiting[k+1:]...)
			if ev.panic != nil {
				w.panics = append(w.panics, fmt.Sprint(ev.panic))
			}
		}
	}
	w.racers = nil
}

// turn waits for the turn of the racer acting as actor, during a race.
func (w *modelWorld) turn(actor string) {
	if r := w.racers[actor]; r != nil {
		r.yield()
	}
}

// modelWorld is one run of the model.
type modelWorld struct {
	cfg     modelConfig
	c       *handofftest.Cluster
	fam     handoff.Family
	execs   []*handoff.Executor
	ctrl    *handofftest.SetController
	fresh   *freshMapper
	legacy  dynamic.Interface
	model   dynamic.Interface // the model's own reads
	desired *modelDesired
	hashes  [mGens]int
	// history holds the controller's past lists of the family, newest
	// last; lag says which one the current pass sees.
	history []*unstructured.UnstructuredList
	lag     int
	// cacheReads counts the executors' cache reads; the n-th serves the
	// list n mod 4 back in history. cacheFresh makes the cache read the
	// cluster's store instead (the final convergence).
	cacheMu    sync.Mutex
	cacheReads int
	cacheFresh bool
	racers     map[string]*racer
	panics     []string
	decoys     []handofftest.Key
	// The second family (modelConfig.Second): its set controller and the
	// sets made so far.
	second  *handofftest.SetController
	seconds int
	// dropped: a removal Step returned settled, so the operator stopped
	// reconciling the component (it dropped its finalizer) until a
	// generation is desired again.
	dropped bool
	// op is the operation running (1 … n, n+1 for the final convergence);
	// vs are the violations the world sees as calls return.
	op int
	vs []violation
	// unrecorded are the resources an executor reported it could not
	// record as dropped by an update in place (handoff.UnrecordedError):
	// they may linger.
	unrecorded map[handofftest.Key]bool
}

func newModelWorld(cfg modelConfig) (*modelWorld, error) {
	opts := []handofftest.Option{handofftest.WithSeed(1)}
	if cfg.GCLag {
		opts = append(opts, handofftest.WithoutAutoGC())
	}
	c := handofftest.NewCluster(opts...)
	c.Register(mSetGVR, mSetKind, false)
	w := &modelWorld{cfg: cfg, c: c, fam: modelFamily(), unrecorded: map[handofftest.Key]bool{}}
	w.fresh = &freshMapper{staleMapper{c: c}}
	w.legacy = &modelClient{w: w, actor: "legacy", inner: c.ClientFor("legacy")}
	w.model = c.ClientFor("model")
	prop := metav1.DeletePropagationForeground
	if cfg.Background {
		prop = metav1.DeletePropagationBackground
	}
	if cfg.OldAPIs != oldGone {
		for _, gvr := range mOldVersions {
			if err := c.AddVersion(gvr); err != nil {
				return nil, err
			}
		}
	}
	if cfg.CertManager {
		crd := handofftest.Object(kCRD.apiVersion(), kCRD.kind, "", kCert.crd, nil, map[string]any{"spec": map[string]any{"group": kCert.gvr.Group}})
		if err := c.Add(crd); err != nil {
			return nil, err
		}
		c.Register(kCert.gvr, kCert.kind, kCert.namespaced)
	}
	newExec := func(actor string) *handoff.Executor {
		var mapper meta.RESTMapper = w.fresh
		if !cfg.FreshMapper {
			stale := &staleMapper{c: c}
			stale.get() // filled when the operator starts
			mapper = stale
		}
		dyn := &modelClient{w: w, actor: actor, inner: c.ClientFor(actor)}
		e := &handoff.Executor{
			Family: w.fam, Dynamic: dyn,
			Mapper: mapper, Build: w.build, RoleOrder: mRoles,
			Prune: mPrune(), Propagation: prop, Concurrency: cfg.Concurrency,
		}
		if cfg.Cache && actor != "controller" {
			e.Cache = (*modelCache)(w)
		}
		if cfg.Metadata {
			e.Metadata = handofftest.MetadataOver(dyn)
		}
		if cfg.Objects == objLongLived {
			cached := c.CachedMapper()
			_, _ = cached.RESTMapping(kConfigMap.gk()) // filled when the operator starts
			e.Objects = handoff.NewDynamicObjects(dyn, cached)
		}
		return e
	}
	for i := range 4 {
		w.execs = append(w.execs, newExec(fmt.Sprintf("executor-%d", i+1)))
	}
	ctrlClient := &modelClient{w: w, actor: "controller", inner: c.ClientFor("controller")}
	finalizer := newExec("controller")
	w.ctrl = &handofftest.SetController{
		Executor: finalizer, Client: ctrlClient, Mapper: w.fresh,
		Finalizer: mFinalizer, ReadyAfter: cfg.ReadyAfter, Unowned: mUnowned,
		List: w.controllerList, SkipNotServed: true, OtherFamilies: true,
	}
	w.ctrl.Finalize = func(ctx context.Context, set *unstructured.Unstructured, family []handoff.Set) (handoff.FinalizeResult, error) {
		res, err := w.finalizerFor(set, family).Finalize(ctx, set)
		w.finalized(set, res)
		return res, err
	}
	if err := w.seedDecoys(); err != nil {
		return nil, err
	}
	if cfg.Second {
		if err := w.startSecond(); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *modelWorld) build(_ context.Context, d handoff.Desired, r handoff.Role) (*unstructured.Unstructured, error) {
	g, h, err := parseRoleHash(r.Hash)
	if err != nil {
		return nil, err
	}
	if genName(g) != d.Generation {
		return nil, fmt.Errorf("role %s hash %s is not of generation %s", r.Name, r.Hash, d.Generation)
	}
	return w.cfg.setBody(g, r.Name, h), nil
}

// controllerList is the controller's List hook: it lists the family (a
// real call), remembers the list, and hands the pass the list of lag
// passes ago, as an informer cache that lags would. Sets the model knows to
// be unreadable are left out: a real controller reconciles sets one by one,
// so one it cannot read does not stop the others.
func (w *modelWorld) controllerList(ctx context.Context) (*unstructured.UnstructuredList, error) {
	list, err := w.ctrl.Client.Resource(mSetGVR).List(ctx, metav1.ListOptions{LabelSelector: w.fam.LabelSelector().String()})
	if err != nil {
		return nil, err
	}
	items := list.Items[:0]
	for _, it := range list.Items {
		if s := deriveSet(&it); s.readable() {
			items = append(items, it)
		}
	}
	list.Items = items
	w.history = append(w.history, list)
	if w.lag == 0 {
		return list, nil // the controller's own copy; history keeps what it saw
	}
	return w.history[max(len(w.history)-1-w.lag, 0)].DeepCopy(), nil
}

// modelCache is the executors' lagging cache (modelConfig.Cache).
type modelCache modelWorld

var _ handoff.SetLister = (*modelCache)(nil)

func (mc *modelCache) List(sel labels.Selector) ([]*unstructured.Unstructured, error) {
	w := (*modelWorld)(mc)
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	var items []unstructured.Unstructured
	if w.cacheFresh || len(w.history) == 0 {
		for _, o := range w.c.Objects() {
			if o.GetKind() == mSetKind {
				items = append(items, *o)
			}
		}
	} else {
		k := w.cacheReads % 4
		w.cacheReads++
		items = w.history[max(len(w.history)-1-k, 0)].DeepCopy().Items
	}
	var out []*unstructured.Unstructured
	for i := range items {
		if sel.Matches(labels.Set(items[i].GetLabels())) {
			out = append(out, &items[i])
		}
	}
	return out, nil
}

// seedDecoys stores objects that are none of the family's business: sets
// of another component and of another type, and objects other owners own,
// some named like the component's.
func (w *modelWorld) seedDecoys() error {
	mTrue := true
	setOf := func(name, uid string, lbls map[string]string, cm string) []*unstructured.Unstructured {
		s := handofftest.Object(mSetGVR.GroupVersion().String(), mSetKind, "", name, lbls,
			map[string]any{"spec": map[string]any{"manifests": []any{manifest(kConfigMap, nsA, cm, nil, nil)}}})
		s.SetUID(types.UID(uid))
		s.SetFinalizers([]string{mFinalizer})
		owned := handofftest.Object("v1", "ConfigMap", nsA, cm, nil, map[string]any{"data": map[string]any{"k": "v"}})
		owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: mSetGVR.GroupVersion().String(), Kind: mSetKind, Name: name, UID: types.UID(uid), Controller: &mTrue}})
		return []*unstructured.Unstructured{s, owned}
	}
	var objs []*unstructured.Unstructured
	objs = append(objs, setOf("chain-main-static-7x2kq", "decoy-1", map[string]string{mCreatedBy: "TektonChain", mType: "main", mGeneration: "v1"}, "chains-config")...)
	objs = append(objs, setOf("pipeline-pre-4bq9z", "decoy-2", map[string]string{mCreatedBy: "TektonPipeline", mType: "pre", mGeneration: "v1"}, "pre-config")...)
	app := handofftest.Object("apps/v1", "Deployment", nsOther, "app", nil, map[string]any{"spec": map[string]any{"replicas": int64(1)}})
	app.SetUID("decoy-3")
	lookalike := handofftest.Object("v1", "ConfigMap", nsOther, "config-defaults", nil, map[string]any{"data": map[string]any{"k": "v"}})
	lookalike.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: "decoy-3"}})
	user := handofftest.Object("v1", "ConfigMap", nsA, "user-config", nil, map[string]any{"data": map[string]any{"k": "v"}})
	objs = append(objs, app, lookalike, user)
	for _, o := range objs {
		w.decoys = append(w.decoys, handofftest.KeyOf(o))
	}
	return w.c.Add(objs...)
}

// modelClient wraps an actor's dynamic client: before each call it waits
// for the actor's turn in a race, and after a create of a CRD it makes the
// cluster serve the CRD's kind, as an API server does.
type modelClient struct {
	w     *modelWorld
	actor string
	inner dynamic.Interface
	// one lets one call of the client at a time wait for its turn and
	// run: an executor's concurrent set writes take their turns one by
	// one, so a race still runs one call at a time.
	one sync.Mutex
}

var _ dynamic.Interface = (*modelClient)(nil)

func (m *modelClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &modelResource{m: m, gvr: gvr, ri: m.inner.Resource(gvr), nri: m.inner.Resource(gvr)}
}

type modelResource struct {
	m   *modelClient
	gvr schema.GroupVersionResource
	ri  dynamic.ResourceInterface
	nri dynamic.NamespaceableResourceInterface
}

func (r *modelResource) Namespace(ns string) dynamic.ResourceInterface {
	return &modelResource{m: r.m, gvr: r.gvr, ri: r.nri.Namespace(ns)}
}

// before waits for the client's turn and returns what ends the call.
func (r *modelResource) before() (after func()) {
	r.m.one.Lock()
	r.m.w.turn(r.m.actor)
	return r.m.one.Unlock
}

func (r *modelResource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.before()()
	out, err := r.ri.Create(ctx, obj, opts, sub...)
	if r.gvr.Resource == kCRD.gvr.Resource && obj != nil {
		r.m.w.crdChanged(obj.GetName())
	}
	return out, err
}

func (r *modelResource) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.before()()
	return r.ri.Update(ctx, obj, opts, sub...)
}

func (r *modelResource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	defer r.before()()
	return r.ri.UpdateStatus(ctx, obj, opts)
}

func (r *modelResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	defer r.before()()
	err := r.ri.Delete(ctx, name, opts, sub...)
	if r.gvr.Resource == kCRD.gvr.Resource {
		r.m.w.crdChanged(name)
	}
	return err
}

func (r *modelResource) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	defer r.before()()
	return r.ri.DeleteCollection(ctx, opts, listOpts)
}

func (r *modelResource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.before()()
	return r.ri.Get(ctx, name, opts, sub...)
}

func (r *modelResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	defer r.before()()
	return r.ri.List(ctx, opts)
}

func (r *modelResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	defer r.before()()
	return r.ri.Watch(ctx, opts)
}

func (r *modelResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.before()()
	return r.ri.Patch(ctx, name, pt, data, opts, sub...)
}

func (r *modelResource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.before()()
	return r.ri.Apply(ctx, name, obj, opts, sub...)
}

func (r *modelResource) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	defer r.before()()
	return r.ri.ApplyStatus(ctx, name, obj, opts)
}

// crdChanged makes the cluster serve the kind of a CRD once the CRD
// exists (also after a create whose response was lost), and stop serving
// it once the CRD is gone.
func (w *modelWorld) crdChanged(crd string) {
	for _, k := range mKinds {
		if k.crd != crd {
			continue
		}
		exists := w.c.Exists(handofftest.Key{Group: kCRD.gvr.Group, Kind: kCRD.kind, Name: crd})
		if exists == w.serves(k) {
			return
		}
		if exists {
			w.c.Register(k.gvr, k.kind, k.namespaced)
		} else {
			w.c.Unregister(k.gvr)
		}
		w.fresh.Reset()
	}
}

// serves reports whether the cluster serves a kind now.
func (w *modelWorld) serves(k mKind) bool {
	_, err := w.c.Mapper().RESTMapping(k.gk())
	return err == nil
}
