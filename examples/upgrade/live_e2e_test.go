//go:build e2e

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/internal/controlplane"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestLive runs the demo's live mode against a real control plane, the
// ways a user would point it at a cluster: the first run finds the control
// plane's kubeconfig through $KUBECONFIG alone (no -kubeconfig) and
// installs the set CRD; the second merges a decoy kubeconfig before it in
// $KUBECONFIG, whose current context names an unreachable server, and
// picks the control plane with -context; the third has only the decoy in
// $KUBECONFIG and names the control plane's file with -kubeconfig. The
// later runs find the set CRD and the first run's Namespace and CRDs. All
// must upgrade with zero gap.
func TestLive(t *testing.T) {
	if os.Getenv(controlplane.EnvBinDir) == "" {
		t.Fatalf("$%s is not set: run hack/e2e.sh, or hack/controlplane/build.sh and export its output", controlplane.EnvBinDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	data, err := os.ReadFile(cp.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig, decoy := filepath.Join(dir, "config"), filepath.Join(dir, "decoy")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(decoy, []byte(`apiVersion: v1
kind: Config
clusters:
- name: decoy
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: decoy
  user: {token: decoy}
contexts:
- name: decoy
  context: {cluster: decoy, user: decoy}
current-context: decoy
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod, whatever runs the test

	runs := []struct {
		name, env string
		target    target
	}{
		{"first run", kubeconfig, target{}},
		{"second run", decoy + string(os.PathListSeparator) + kubeconfig, target{Context: "handoff"}},
		{"third run", decoy, target{Kubeconfig: kubeconfig}},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", r.env)
			var out bytes.Buffer
			began := time.Now()
			s, err := runCluster(ctx, &out, r.target)
			t.Logf("%s in %v:\n%s\n%s", r.name, time.Since(began).Round(time.Millisecond), out.String(), s)
			if err != nil {
				if tail := cp.LogTail("kube-controller-manager", 20); tail != "" {
					t.Logf("kube-controller-manager log:\n%s", tail)
				}
				t.Fatal(err)
			}
			for _, g := range s.gaps {
				t.Errorf("I1: %s", g)
			}
			if s.shared < 60 || s.keptShared != s.shared {
				t.Errorf("shared resources: %d kept of %d, want all of at least 60", s.keptShared, s.shared)
			}
			if s.obsolete == 0 || s.pruned != s.obsolete {
				t.Errorf("obsolete resources: %d pruned of %d, want all of at least 1", s.pruned, s.obsolete)
			}
			if s.created == 0 || s.exists != s.created {
				t.Errorf("new resources: %d created of %d, want all of at least 1", s.exists, s.created)
			}
			if got := s.String(); !strings.Contains(got, "== handoff:") || !strings.Contains(got, "gap: 0 absences") {
				t.Errorf("summary does not read as the fake cluster's does:\n%s", got)
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); !strings.HasSuffix(first, "(context handoff)") {
				t.Errorf("first line %q does not name the control plane's context", first)
			}
			if strings.Contains(out.String(), "install CRD") != (r.name == "first run") {
				t.Errorf("set CRD installed on the %s: %v", r.name, strings.Contains(out.String(), "install CRD"))
			}
		})
	}

	// The record would have seen an absence: delete and re-create a
	// watched ConfigMap, and the recorder must report exactly one gap.
	t.Run("recorder sees an absence", func(t *testing.T) {
		t.Setenv("KUBECONFIG", kubeconfig)
		c, err := connect(target{})
		if err != nil {
			t.Fatal(err)
		}
		dyn := c.dynamic
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		cms := dyn.Resource(gvr).Namespace("default")
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		cm.SetName("recorded")
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		key := handofftest.KeyOf(cm)
		key.Namespace = "default"
		rec, err := record(ctx, dyn, c.mapper, []handofftest.Key{key})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "recorded", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		gaps, err := rec.stop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(gaps) != 1 || gaps[0].Key != key || gaps[0].To.Sub(gaps[0].From) < 100*time.Millisecond {
			t.Fatalf("gaps = %v, want one of about 200ms for %s", gaps, key)
		}
		t.Logf("recorded %s", gaps[0])
	})
}
