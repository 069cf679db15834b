package handoff

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	mf "github.com/manifestival/manifestival"
	mffake "github.com/manifestival/manifestival/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// recordingClient is an mf.Client that records what it was asked and
// answers with err.
type recordingClient struct {
	got     []string
	deletes []*mf.DeleteOptions
	updated *unstructured.Unstructured
	live    *unstructured.Unstructured
	err     error
}

func (c *recordingClient) Create(obj *unstructured.Unstructured, _ ...mf.ApplyOption) error {
	c.got = append(c.got, "create "+obj.GetAPIVersion()+" "+obj.GetName())
	return c.err
}

func (c *recordingClient) Update(obj *unstructured.Unstructured, _ ...mf.ApplyOption) error {
	c.got = append(c.got, "update "+obj.GetAPIVersion()+" "+obj.GetName()+" rv="+obj.GetResourceVersion())
	c.updated = obj
	return c.err
}

func (c *recordingClient) Delete(obj *unstructured.Unstructured, opts ...mf.DeleteOption) error {
	c.got = append(c.got, "delete "+obj.GetAPIVersion()+" "+obj.GetNamespace()+"/"+obj.GetName())
	c.deletes = append(c.deletes, mf.DeleteWith(opts))
	return c.err
}

func (c *recordingClient) Get(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c.got = append(c.got, "get "+obj.GetAPIVersion()+" "+obj.GetKind()+" "+obj.GetNamespace()+"/"+obj.GetName())
	return c.live, c.err
}

var _ mf.Client = (*recordingClient)(nil)

func cm(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestManifestivalObjectsGet(t *testing.T) {
	deploy := &unstructured.Unstructured{}
	deploy.SetAPIVersion("apps/v1")
	deploy.SetKind("Deployment")
	deploy.SetNamespace("ns")
	deploy.SetName("web")
	deploy.SetUID("u1")
	versions := ManifestVersions([]unstructured.Unstructured{*deploy, *cm("ns", "x")})
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "example.dev", Kind: "Widget"}}

	tests := map[string]struct {
		objs      ManifestivalObjects
		ref       Ref
		wantUID   types.UID
		notFound  bool
		notServed bool
		wantErr   bool
	}{
		"a kind the versions know is found in manifestival's fake, which keys by apiVersion": {
			objs:    ManifestivalObjects{Client: fakeWith(t, deploy), Versions: versions},
			ref:     Ref{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "web"},
			wantUID: "u1",
		},
		"a missing object is NotFound": {
			objs:     ManifestivalObjects{Client: fakeWith(t), Versions: versions},
			ref:      Ref{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "web"},
			notFound: true,
		},
		"a kind the client cannot map is a plain error without NotServed (fail closed)": {
			objs:    ManifestivalObjects{Client: &recordingClient{err: noMatch}},
			ref:     Ref{Group: "example.dev", Kind: "Widget", Name: "w"},
			wantErr: true,
		},
		"NotServed turns the client's proof into ErrNotServed": {
			objs:      ManifestivalObjects{Client: &recordingClient{err: noMatch}, NotServed: meta.IsNoMatchError},
			ref:       Ref{Group: "example.dev", Kind: "Widget", Name: "w"},
			notServed: true,
		},
		"NotServed does not claim other errors": {
			objs:    ManifestivalObjects{Client: &recordingClient{err: errors.New("connection refused")}, NotServed: meta.IsNoMatchError},
			ref:     Ref{Kind: "ConfigMap", Namespace: "ns", Name: "x"},
			wantErr: true,
		},
		"no Client is an error, not a panic": {
			objs:    ManifestivalObjects{},
			ref:     Ref{Kind: "ConfigMap", Namespace: "ns", Name: "x"},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.objs.Get(context.Background(), tc.ref)
			if d := cmp.Diff(tc.notFound, apierrors.IsNotFound(err)); d != "" {
				t.Errorf("IsNotFound(%v) (-want +got):\n%s", err, d)
			}
			if d := cmp.Diff(tc.notServed, errors.Is(err, ErrNotServed)); d != "" {
				t.Errorf("errors.Is(%v, ErrNotServed) (-want +got):\n%s", err, d)
			}
			if tc.wantErr && err == nil {
				t.Fatal("want an error, got none")
			}
			if tc.wantUID != "" {
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.wantUID, got.GetUID()); d != "" {
					t.Errorf("UID (-want +got):\n%s", d)
				}
			}
		})
	}
}

func fakeWith(t *testing.T, objs ...*unstructured.Unstructured) mf.Client {
	t.Helper()
	c := mffake.New()
	for _, o := range objs {
		if err := c.Create(o.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestManifestivalObjectsWrites(t *testing.T) {
	live := cm("ns", "shared")
	live.SetResourceVersion("42")
	live.SetUID("u1")
	owner := metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: "new", UID: "s2"}

	t.Run("SetOwnerReferences updates the object as read, resourceVersion included, and leaves live alone", func(t *testing.T) {
		c := &recordingClient{}
		o := ManifestivalObjects{Client: c}
		if err := o.SetOwnerReferences(context.Background(), live, []metav1.OwnerReference{owner}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"update v1 shared rv=42"}, c.got); d != "" {
			t.Errorf("calls (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]metav1.OwnerReference{owner}, c.updated.GetOwnerReferences()); d != "" {
			t.Errorf("ownerReferences written (-want +got):\n%s", d)
		}
		if len(live.GetOwnerReferences()) != 0 {
			t.Error("live was modified")
		}
	})

	t.Run("a Conflict from the client is returned as a Conflict", func(t *testing.T) {
		conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "shared", errors.New("changed"))
		o := ManifestivalObjects{Client: &recordingClient{err: conflict}}
		err := o.SetOwnerReferences(context.Background(), live, nil)
		if !apierrors.IsConflict(err) {
			t.Errorf("got %v, want a Conflict", err)
		}
	})

	t.Run("Delete carries the UID precondition and policy and reports NotFound", func(t *testing.T) {
		c := &recordingClient{}
		o := ManifestivalObjects{Client: c, Versions: func(schema.GroupKind) []string { return []string{"v1"} }}
		if err := o.Delete(context.Background(), RefOf(live), "u1", metav1.DeletePropagationBackground); err != nil {
			t.Fatal(err)
		}
		uid := types.UID("u1")
		policy := metav1.DeletePropagationBackground
		want := []*mf.DeleteOptions{{
			ForDelete:      &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy},
			IgnoreNotFound: false,
		}}
		if d := cmp.Diff(want, c.deletes); d != "" {
			t.Errorf("delete options (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"delete v1 ns/shared"}, c.got); d != "" {
			t.Errorf("calls (-want +got):\n%s", d)
		}
	})

	t.Run("a canceled context makes no call", func(t *testing.T) {
		c := &recordingClient{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := ManifestivalObjects{Client: c}.Delete(ctx, RefOf(live), "u1", "")
		if !errors.Is(err, context.Canceled) || len(c.got) != 0 {
			t.Errorf("got %v after %v, want context.Canceled and no call", err, c.got)
		}
	})
}

// TestExecutorFinalizeOverManifestival runs Finalize with nothing but a
// SetClient and ManifestivalObjects: no dynamic client, no REST mapper.
func TestExecutorFinalizeOverManifestival(t *testing.T) {
	fam := Family{
		Resource:        schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "bundles"},
		Kind:            "Bundle",
		Selector:        map[string]string{"example.dev/component": "web"},
		GenerationLabel: "example.dev/version",
	}
	set := func(name, uid, gen string, objs ...*unstructured.Unstructured) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetAPIVersion("example.dev/v1")
		u.SetKind("Bundle")
		u.SetName(name)
		u.SetUID(types.UID(uid))
		u.SetLabels(map[string]string{"example.dev/component": "web", "example.dev/version": gen, DefaultRoleLabel: "main"})
		var items []any
		for _, o := range objs {
			items = append(items, o.DeepCopy().Object)
		}
		_ = unstructured.SetNestedSlice(u.Object, items, "spec", "manifests")
		return u
	}
	owned := func(u *unstructured.Unstructured, setName, setUID string) *unstructured.Unstructured {
		u = u.DeepCopy()
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.dev/v1", Kind: "Bundle", Name: setName, UID: types.UID(setUID), Controller: ptrTo(true)}})
		return u
	}
	shared, obsolete := cm("ns", "shared"), cm("ns", "obsolete")
	hook := &unstructured.Unstructured{}
	hook.SetAPIVersion("admissionregistration.k8s.io/v1")
	hook.SetKind("ValidatingWebhookConfiguration")
	hook.SetName("obsolete.webhook")
	old := set("web-v1", "s1", "v1", shared, obsolete, hook)
	next := set("web-v2", "s2", "v2", shared)
	client := fakeWith(t, owned(shared, "web-v1", "s1"), owned(obsolete, "web-v1", "s1"), hook)

	gvr := fam.Resource
	sets := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "BundleList"}, old, next).Resource(gvr)
	e := &Executor{Family: fam, Sets: sets, Prune: DefaultPruneOptions(),
		Objects: ManifestivalObjects{Client: client, Versions: ManifestVersions([]unstructured.Unstructured{*shared, *hook})}}
	typed := old.DeepCopy()
	typed.SetAPIVersion("")
	typed.SetKind("") // as a typed set converted to unstructured arrives
	res, err := e.Finalize(context.Background(), typed)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"ConfigMap ns/shared"}, refStrings(res.HandedOver)); d != "" {
		t.Errorf("handed over (-want +got):\n%s", d)
	}
	// The webhook configuration has no owner: Finalize deletes it. The
	// obsolete ConfigMap is web-v1's alone: the garbage collector does.
	if d := cmp.Diff([]string{"ValidatingWebhookConfiguration.admissionregistration.k8s.io obsolete.webhook"}, refStrings(res.Deleted)); d != "" {
		t.Errorf("deleted (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ConfigMap ns/obsolete"}, refStrings(res.Collected)); d != "" {
		t.Errorf("left to the garbage collector (-want +got):\n%s", d)
	}
	// manifestival's client cannot list: every object was read with a Get.
	if res.Reads.Lists != 0 || res.Reads.Gets < 3 || len(res.Reads.Fallback) != 2 {
		t.Errorf("reads %+v: want Gets only, for the 2 scopes", res.Reads)
	}
	got, err := client.Get(shared)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(types.UID("s2"), got.GetOwnerReferences()[0].UID); d != "" {
		t.Errorf("owner of the shared ConfigMap (-want +got):\n%s", d)
	}
	if _, err := client.Get(hook); !apierrors.IsNotFound(err) {
		t.Errorf("obsolete webhook configuration: got %v, want NotFound", err)
	}
}

func refStrings(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Ref.String())
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
