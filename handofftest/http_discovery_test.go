package handofftest

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// discovered lists "group/version resource namespaced verbs" for every
// resource a discovery client finds.
func discovered(t *testing.T, s *Server) []string {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(s.Config())
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var out []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			scope := "cluster"
			if r.Namespaced {
				scope = "namespaced"
			}
			out = append(out, strings.Join([]string{l.GroupVersion, r.Name, r.Kind, scope, strings.Join(r.Verbs, ",")}, " "))
		}
	}
	sort.Strings(out)
	return out
}

func hasLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func TestServeDiscovery(t *testing.T) {
	c := newCluster(t)
	v1 := schema.GroupVersionResource{Group: setGVR.Group, Version: "v1", Resource: setGVR.Resource}
	if err := c.AddVersion(v1); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, c, "discoverer")
	all := "create,delete,deletecollection,get,list,patch,update,watch"
	want := map[string]bool{
		"v1 configmaps ConfigMap namespaced " + all:                                                     true,
		"v1 configmaps/status ConfigMap namespaced get,patch,update":                                    true,
		"v1 namespaces Namespace cluster " + all:                                                        true,
		"apps/v1 deployments Deployment namespaced " + all:                                              true,
		"apps/v1 deployments/status Deployment namespaced get,patch,update":                             true,
		"operator.tekton.dev/v1alpha1 tektoninstallersets TektonInstallerSet cluster " + all:            true,
		"operator.tekton.dev/v1 tektoninstallersets TektonInstallerSet cluster " + all:                  true,
		"operator.tekton.dev/v1 tektoninstallersets/status TektonInstallerSet cluster get,patch,update": true,
	}
	got := discovered(t, s)
	for line := range want {
		if !hasLine(got, line) {
			t.Errorf("discovery lacks %q; it has:\n%s", line, strings.Join(got, "\n"))
		}
	}

	t.Run("a mapper over discovery maps the kinds, the first version preferred", func(t *testing.T) {
		dc := discovery.NewDiscoveryClientForConfigOrDie(s.Config())
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		type mapping struct {
			Resource   schema.GroupVersionResource
			Namespaced bool
		}
		var got []mapping
		for _, gk := range []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "apps", Kind: "Deployment"}, {Group: setGVR.Group, Kind: "TektonInstallerSet"}} {
			m, err := mapper.RESTMapping(gk)
			if err != nil {
				t.Fatalf("mapping %s: %v", gk, err)
			}
			got = append(got, mapping{m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace})
		}
		want := []mapping{{cmGVR, true}, {depGVR, true}, {setGVR, false}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("mappings (-want +got):\n%s", diff)
		}
		if _, err := mapper.RESTMapping(schema.GroupKind{Group: setGVR.Group, Kind: "TektonInstallerSet"}, "v1"); err != nil {
			t.Errorf("mapping at the added version: %v", err)
		}
	})

	t.Run("an unregistered version and kind are gone", func(t *testing.T) {
		c.Unregister(setGVR)
		got := discovered(t, s)
		if hasLine(got, "operator.tekton.dev/v1alpha1 ") || !hasLine(got, "operator.tekton.dev/v1 tektoninstallersets ") {
			t.Errorf("after unregistering v1alpha1, discovery has:\n%s", strings.Join(got, "\n"))
		}
		c.Unregister(v1)
		if got := discovered(t, s); hasLine(got, "operator.tekton.dev/") {
			t.Errorf("after unregistering the kind, discovery has:\n%s", strings.Join(got, "\n"))
		}
	})

	t.Run("server version", func(t *testing.T) {
		v, err := discovery.NewDiscoveryClientForConfigOrDie(s.Config()).ServerVersion()
		if err != nil || v.Major != "1" {
			t.Errorf("server version = %v, %v", v, err)
		}
	})
}
