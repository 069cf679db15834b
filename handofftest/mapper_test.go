package handofftest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMapper(t *testing.T) {
	c := newCluster(t)
	m := c.Mapper()
	tests := map[string]struct {
		gvk   schema.GroupVersionKind
		want  schema.GroupVersionResource
		scope meta.RESTScopeName
	}{
		"a core namespaced kind": {
			gvk:   schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			want:  cmGVR,
			scope: meta.RESTScopeNameNamespace,
		},
		"a cluster-scoped built-in kind": {
			gvk:   schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
			want:  schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
			scope: meta.RESTScopeNameRoot,
		},
		"autoscaling v2": {
			gvk:   schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
			want:  schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
			scope: meta.RESTScopeNameNamespace,
		},
		"a registered custom kind": {
			gvk:   setGVR.GroupVersion().WithKind("TektonInstallerSet"),
			want:  setGVR,
			scope: meta.RESTScopeNameRoot,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			mapping, err := m.RESTMapping(tt.gvk.GroupKind(), tt.gvk.Version)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, mapping.Resource); diff != "" {
				t.Errorf("resource (-want +got):\n%s", diff)
			}
			if got := mapping.Scope.Name(); got != tt.scope {
				t.Errorf("scope = %s, want %s", got, tt.scope)
			}
			kind, err := m.KindFor(tt.want)
			if err != nil || kind != tt.gvk {
				t.Errorf("KindFor(%s) = %s, %v; want %s", tt.want, kind, err, tt.gvk)
			}
		})
	}
}

// A kind registered after a mapper was made (a CRD served later): the
// live mapper knows it at once, the cached one only after a Reset, as
// client-go's DeferredDiscoveryRESTMapper over a memory cache does.
func TestMapperFollowsRegistrations(t *testing.T) {
	interceptors := schema.GroupVersionResource{Group: "triggers.tekton.dev", Version: "v1alpha1", Resource: "clusterinterceptors"}
	gk := schema.GroupKind{Group: interceptors.Group, Kind: "ClusterInterceptor"}
	type step int
	const (
		use      step = iota // map the kind
		register             // register the kind
		reset                // reset the mapper
	)
	for name, tt := range map[string]struct {
		mapper func(*Cluster) meta.ResettableRESTMapper
		steps  []step
		want   []bool // per use: whether the kind is known
	}{
		"the live mapper knows a kind from its registration on": {
			mapper: (*Cluster).Mapper,
			steps:  []step{use, register, use},
			want:   []bool{false, true},
		},
		"the live mapper needs no reset": {
			mapper: (*Cluster).Mapper,
			steps:  []step{use, register, reset, use},
			want:   []bool{false, true},
		},
		"the cached mapper keeps the kinds of its first use": {
			mapper: (*Cluster).CachedMapper,
			steps:  []step{use, register, use, use},
			want:   []bool{false, false, false},
		},
		"the cached mapper knows the kind after a reset": {
			mapper: (*Cluster).CachedMapper,
			steps:  []step{use, register, use, reset, use},
			want:   []bool{false, false, true},
		},
		"the cached mapper reads the kinds on first use, not when made": {
			mapper: (*Cluster).CachedMapper,
			steps:  []step{register, use},
			want:   []bool{true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			m := tt.mapper(c)
			var got []bool
			for _, s := range tt.steps {
				switch s {
				case use:
					mapping, err := m.RESTMapping(gk)
					if err != nil && !meta.IsNoMatchError(err) {
						t.Fatalf("RESTMapping: %v, want a mapping or NoMatch", err)
					}
					if err == nil && (mapping.Resource != interceptors || mapping.Scope.Name() != meta.RESTScopeNameRoot) {
						t.Errorf("mapping %s scope %s, want %s, cluster-scoped", mapping.Resource, mapping.Scope.Name(), interceptors)
					}
					got = append(got, err == nil)
				case register:
					c.Register(interceptors, gk.Kind, false)
				case reset:
					m.Reset()
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("known at each use (-want +got):\n%s", diff)
			}
		})
	}
}
