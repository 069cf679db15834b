package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff/handofftest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/restmapper"
	clienttesting "k8s.io/client-go/testing"
)

// Two kubeconfig files: "a" with a token, "b" with an oidc auth-provider
// (the plugin kind the old hand-written loader refused).
const (
	kubeconfigA = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
users:
- name: a
  user: {token: token-a}
contexts:
- name: a
  context: {cluster: a, user: a}
current-context: a
`
	kubeconfigB = `apiVersion: v1
kind: Config
clusters:
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: b
  user:
    auth-provider:
      name: oidc
      config: {idp-issuer-url: "https://issuer.example", client-id: demo, id-token: not-checked-until-used}
contexts:
- name: b
  context: {cluster: b, user: b}
current-context: b
`
)

// TestConnect checks that the live run finds its cluster as kubectl does,
// without contacting it.
func TestConnect(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for path, content := range map[string]string{a: kubeconfigA, b: kubeconfigB} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list := func(paths ...string) string { return strings.Join(paths, string(os.PathListSeparator)) }
	type got struct{ Host, Source, Token, AuthProvider string }
	tests := map[string]struct {
		env     string // $KUBECONFIG
		target  target
		want    got
		wantErr string
	}{
		"$KUBECONFIG names the file": {
			env:  a,
			want: got{Host: "https://a.example:6443", Source: "context a", Token: "token-a"},
		},
		"$KUBECONFIG's files are merged and the first current-context wins": {
			env:  list(b, a),
			want: got{Host: "https://b.example:6443", Source: "context b", AuthProvider: "oidc"},
		},
		"-context picks a context of a later merged file": {
			env:    list(b, a),
			target: target{Context: "a"},
			want:   got{Host: "https://a.example:6443", Source: "context a", Token: "token-a"},
		},
		"-kubeconfig replaces $KUBECONFIG": {
			env:    b,
			target: target{Kubeconfig: a},
			want:   got{Host: "https://a.example:6443", Source: "context a", Token: "token-a"},
		},
		"an unknown -context is an error": {
			env:     a,
			target:  target{Context: "nope"},
			wantErr: `context "nope" does not exist`,
		},
		"a missing -kubeconfig file is an error": {
			target:  target{Kubeconfig: filepath.Join(dir, "missing.yaml")},
			wantErr: "missing.yaml: no such file",
		},
		"no configuration outside a pod is an error": {
			env:     filepath.Join(dir, "missing.yaml"), // missing $KUBECONFIG files are skipped
			wantErr: "no configuration has been provided",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
			c, err := connect(tt.target)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("connect(%+v) = %v, want an error containing %q", tt.target, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := got{Host: c.config.Host, Source: c.source, Token: c.config.BearerToken}
			if c.config.AuthProvider != nil {
				g.AuthProvider = c.config.AuthProvider.Name
			}
			if diff := cmp.Diff(tt.want, g); diff != "" {
				t.Errorf("connect(%+v) (-want +got):\n%s", tt.target, diff)
			}
		})
	}
}

// TestMapping checks that a kind served after the mapper first read
// discovery (a CRD installed meanwhile) is found by mapping, which resets
// the in-memory cache once, though the cached mapper alone misses it.
func TestMapping(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disco.Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap"}},
	}}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	cm := schema.GroupKind{Kind: "ConfigMap"}
	if _, err := mapping(mapper, cm); err != nil {
		t.Fatal(err)
	}
	set := schema.GroupKind{Group: handofftest.SetResource.Group, Kind: "TektonInstallerSet"}
	disco.Resources = append(disco.Resources, &metav1.APIResourceList{
		GroupVersion: handofftest.SetResource.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: handofftest.SetResource.Resource, SingularName: "tektoninstallerset", Kind: set.Kind}},
	})
	if _, err := mapper.RESTMapping(set); err == nil {
		t.Fatal("the cached mapper knows a kind served after its first read: the test proves nothing")
	}
	m, err := mapping(mapper, set)
	if err != nil {
		t.Fatal(err)
	}
	if m.Resource != handofftest.SetResource || m.Scope.Name() != "root" {
		t.Errorf("mapping(%s) = %s, %s; want %s, root", set, m.Resource, m.Scope.Name(), handofftest.SetResource)
	}
}
