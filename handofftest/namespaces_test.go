package handofftest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// With RequireNamespaces, a create in a namespace that does not exist is
// NotFound and one in a namespace being deleted Forbidden, as the
// NamespaceLifecycle admission of a real API server answers; without it
// any namespace goes.
func TestRequireNamespaces(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		opts []Option
		// terminating is deleted, held by a finalizer, before the creates.
		want map[string]string // namespace of the create → the error, "" for none
	}{
		"by default any namespace goes": {
			want: map[string]string{"ops": "", "missing": "", "terminating": ""},
		},
		"RequireNamespaces": {
			opts: []Option{RequireNamespaces("ops")},
			want: map[string]string{
				"ops":         "",
				"missing":     `namespaces "missing" not found`,
				"terminating": `configmaps "c" is forbidden: unable to create new content in namespace terminating because it is being terminated`,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewCluster(tc.opts...)
			nss := c.ClientFor("admin").Resource(nsGVR)
			ns := object("v1", "Namespace", "", "terminating")
			ns.SetFinalizers([]string{"example.dev/hold"})
			create(t, nss, ns)
			if err := nss.Delete(ctx, "terminating", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for ns := range tc.want {
				_, err := c.ClientFor("operator").Resource(cmGVR).Namespace(ns).Create(ctx, configMap(ns, "c"), metav1.CreateOptions{})
				got[ns] = ""
				if err != nil {
					got[ns] = err.Error()
				}
				switch {
				case tc.want[ns] == "" && c.Exists(Key{Kind: "ConfigMap", Namespace: ns, Name: "c"}) != (err == nil):
					t.Errorf("%s: error %v, but the ConfigMap exists: %v", ns, err, c.Exists(Key{Kind: "ConfigMap", Namespace: ns, Name: "c"}))
				case tc.want[ns] != "" && c.Exists(Key{Kind: "ConfigMap", Namespace: ns, Name: "c"}):
					t.Errorf("%s: the refused ConfigMap was stored", ns)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("errors of the creates (-want +got):\n%s", d)
			}
		})
	}
}

// The errors are typed as the real server's: 404 NotFound for the
// namespaces resource, 403 Forbidden with the NamespaceTerminating cause.
func TestRequireNamespacesErrors(t *testing.T) {
	ctx := context.Background()
	c := NewCluster(RequireNamespaces("ops", "going", "ops"))
	if got := c.Keys(); len(got) != 2 {
		t.Fatalf("the cluster starts with %v, want the Namespaces going and ops", got)
	}
	nss := c.ClientFor("admin").Resource(nsGVR)
	cms := c.ClientFor("operator").Resource(cmGVR).Namespace("going")
	before := create(t, cms, configMap("going", "before"))
	going, _ := c.Get(Key{Kind: "Namespace", Name: "going"})
	going.SetFinalizers([]string{"kubernetes"})
	if _, err := nss.Update(ctx, going, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nss.Delete(ctx, "going", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	_, err := c.ClientFor("operator").Resource(cmGVR).Namespace("missing").Create(ctx, configMap("missing", "c"), metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) || st.Status().Code != http.StatusNotFound ||
		st.Status().Details == nil || st.Status().Details.Kind != "namespaces" || st.Status().Details.Name != "missing" {
		t.Errorf("create in a missing namespace: %#v, want NotFound of namespaces/missing", err)
	}

	// A generated name is not made yet: the error names the generateName.
	cm := configMap("going", "")
	cm.SetGenerateName("config-")
	_, err = c.ClientFor("operator").Resource(cmGVR).Namespace("going").Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !errors.As(err, &st) || st.Status().Code != http.StatusForbidden {
		t.Fatalf("create in a terminating namespace: %#v, want Forbidden", err)
	}
	if d := cmp.Diff(&metav1.StatusDetails{Name: "config-", Kind: "configmaps", Causes: []metav1.StatusCause{{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace going is being terminated", Field: "metadata.namespace",
	}}}, st.Status().Details); d != "" {
		t.Errorf("details (-want +got):\n%s", d)
	}

	// Objects already in a terminating namespace can still be updated;
	// cluster-scoped objects need no namespace.
	before.Object["data"] = map[string]any{"k": "changed"}
	if _, err := cms.Update(ctx, before, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update in a terminating namespace: %v", err)
	}
	if _, err := c.ClientFor("operator").Resource(nsGVR).Create(ctx, object("v1", "Namespace", "", "new"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create a Namespace: %v", err)
	}
	if err := c.Add(configMap("missing", "seeded")); err == nil || !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "handofftest: add ConfigMap missing/seeded") {
		t.Errorf("Add in a missing namespace: %v, want NotFound naming the object", err)
	}
	if err := c.Add(object("v1", "Namespace", "", "later"), configMap("later", "seeded")); err != nil {
		t.Errorf("Add of a Namespace and then an object in it: %v", err)
	}
}
