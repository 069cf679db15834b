package handofftest

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

func TestServeErrors(t *testing.T) {
	ctx := context.Background()
	twoControllers := configMap("ns", "owned")
	twoControllers.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "1", Controller: ptr(true)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: "2", Controller: ptr(true)},
	})
	tests := map[string]struct {
		call func(ri dynamic.ResourceInterface) error
		want string
	}{
		"a get of a missing object is NotFound": {
			call: func(ri dynamic.ResourceInterface) error {
				_, err := ri.Get(ctx, "missing", metav1.GetOptions{})
				return err
			},
			want: "NotFound",
		},
		"a create of an existing name is AlreadyExists": {
			call: func(ri dynamic.ResourceInterface) error {
				_, err := ri.Create(ctx, configMap("ns", "existing"), metav1.CreateOptions{})
				return err
			},
			want: "AlreadyExists",
		},
		"an update at an old resourceVersion is a Conflict": {
			call: func(ri dynamic.ResourceInterface) error {
				u := configMap("ns", "existing")
				u.SetResourceVersion("12345")
				_, err := ri.Update(ctx, u, metav1.UpdateOptions{})
				return err
			},
			want: "Conflict",
		},
		"a delete with another UID as precondition is a Conflict": {
			call: func(ri dynamic.ResourceInterface) error {
				return ri.Delete(ctx, "existing", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(types.UID("other"))}})
			},
			want: "Conflict",
		},
		"two controller references are Invalid": {
			call: func(ri dynamic.ResourceInterface) error {
				_, err := ri.Create(ctx, twoControllers, metav1.CreateOptions{})
				return err
			},
			want: "Invalid",
		},
		"a strategic merge patch is UnsupportedMediaType": {
			call: func(ri dynamic.ResourceInterface) error {
				_, err := ri.Patch(ctx, "existing", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{})
				return err
			},
			want: "UnsupportedMediaType",
		},
		"server-side apply, even of a new object, is UnsupportedMediaType": {
			call: func(ri dynamic.ResourceInterface) error {
				_, err := ri.Apply(ctx, "new", configMap("ns", "new"), metav1.ApplyOptions{FieldManager: "m"})
				return err
			},
			want: "UnsupportedMediaType",
		},
		"a dry run is BadRequest": {
			call: func(ri dynamic.ResourceInterface) error {
				_, err := ri.Create(ctx, configMap("ns", "new"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			},
			want: "BadRequest",
		},
		"an unknown propagationPolicy is BadRequest": {
			call: func(ri dynamic.ResourceInterface) error {
				return ri.Delete(ctx, "existing", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletionPropagation("Sideways"))})
			},
			want: "BadRequest",
		},
		"an unknown subresource is NotFound": {
			call: func(ri dynamic.ResourceInterface) error {
				_, err := ri.Get(ctx, "existing", metav1.GetOptions{}, "scale")
				return err
			},
			want: "NotFound",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			create(t, c.Dynamic().Resource(cmGVR).Namespace("ns"), configMap("ns", "existing"))
			before := len(c.Writes())
			ri := httpDynamic(t, startServer(t, c, "client")).Resource(cmGVR).Namespace("ns")
			if got := errKind(tt.call(ri)); got != tt.want {
				t.Errorf("error = %q, want %q", got, tt.want)
			}
			if w := c.WritesSince(before); len(w) != 0 {
				t.Errorf("a refused call wrote %v", w)
			}
		})
	}
}

func TestServeCRUD(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	s := startServer(t, c, "client")
	dyn := httpDynamic(t, s)
	ri := dyn.Resource(cmGVR).Namespace("ns")

	gen := configMap("ns", "")
	gen.SetGenerateName("gen-")
	made, err := ri.Create(ctx, gen, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create with generateName: %v", err)
	}
	if !strings.HasPrefix(made.GetName(), "gen-") || made.GetUID() == "" || made.GetResourceVersion() == "" {
		t.Errorf("created %s uid %q rv %q", made.GetName(), made.GetUID(), made.GetResourceVersion())
	}
	for _, name := range []string{"a", "b"} {
		u := configMap("ns", name)
		u.SetLabels(map[string]string{"app": name})
		if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dyn.Resource(cmGVR).Namespace("other").Create(ctx, configMap("other", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	names := func(opts metav1.ListOptions, ri dynamic.ResourceInterface) []string {
		t.Helper()
		list, err := ri.List(ctx, opts)
		if err != nil {
			t.Fatalf("list %+v: %v", opts, err)
		}
		var out []string
		for _, u := range list.Items {
			out = append(out, u.GetNamespace()+"/"+u.GetName())
		}
		return out
	}
	lists := map[string]struct {
		ri   dynamic.ResourceInterface
		opts metav1.ListOptions
		want []string
	}{
		"every namespace":            {dyn.Resource(cmGVR), metav1.ListOptions{}, []string{"ns/a", "ns/b", "ns/" + made.GetName(), "other/a"}},
		"a label selector":           {ri, metav1.ListOptions{LabelSelector: "app=b"}, []string{"ns/b"}},
		"a name field selector":      {dyn.Resource(cmGVR), metav1.ListOptions{FieldSelector: "metadata.name=a"}, []string{"ns/a", "other/a"}},
		"a namespace field selector": {dyn.Resource(cmGVR), metav1.ListOptions{FieldSelector: "metadata.namespace=other"}, []string{"other/a"}},
		"a limit is ignored":         {ri, metav1.ListOptions{Limit: 1}, []string{"ns/a", "ns/b", "ns/" + made.GetName()}},
	}
	for name, tt := range lists {
		t.Run("list: "+name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, names(tt.opts, tt.ri)); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("update, merge patch and JSON patch", func(t *testing.T) {
		u, err := ri.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["data"] = map[string]any{"k": "updated"}
		if _, err := ri.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"m":"merged"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		out, err := ri.Patch(ctx, "a", types.JSONPatchType, []byte(`[{"op":"add","path":"/data/j","value":"json"}]`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"k": "updated", "m": "merged", "j": "json"}
		if diff := cmp.Diff(want, out.Object["data"]); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
	})

	t.Run("the status subresource", func(t *testing.T) {
		set := create(t, dyn.Resource(setGVR), installerSet("s"))
		set.Object["status"] = map[string]any{"phase": "one"}
		set.Object["spec"] = map[string]any{"ignored": true}
		if _, err := dyn.Resource(setGVR).UpdateStatus(ctx, set, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(setGVR).Patch(ctx, "s", types.MergePatchType, []byte(`{"status":{"extra":"two"}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		got, err := dyn.Resource(setGVR).Get(ctx, "s", metav1.GetOptions{}, "status")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"phase": "one", "extra": "two"}, got.Object["status"]); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"manifests": []any{}}, got.Object["spec"]); diff != "" {
			t.Errorf("a status write changed the spec (-want +got):\n%s", diff)
		}
	})

	t.Run("a Foreground delete waits for a dependent held by a finalizer", func(t *testing.T) {
		set := create(t, dyn.Resource(setGVR), installerSet("held"))
		dep := ownedBy(configMap("ns", "dependent"), set)
		dep.SetFinalizers([]string{"example.com/hold"})
		create(t, ri, dep)
		err := dyn.Resource(setGVR).Delete(ctx, "held", metav1.DeleteOptions{
			PropagationPolicy: ptr(metav1.DeletePropagationForeground),
			Preconditions:     &metav1.Preconditions{UID: ptr(set.GetUID())},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{
			"set":       state(c, keyOf(setGVR, "TektonInstallerSet", "", "held")),
			"dependent": state(c, cmKey("dependent")),
		}
		want := map[string]string{"set": "deleting foregroundDeletion", "dependent": "deleting example.com/hold owners=held"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
	})

	t.Run("deletecollection", func(t *testing.T) {
		if err := ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app"}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"ns/dependent", "ns/" + made.GetName()}, names(metav1.ListOptions{}, ri)); diff != "" {
			t.Errorf("left (-want +got):\n%s", diff)
		}
	})
}

func TestServeMetadata(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	u := configMap("ns", "a")
	u.SetLabels(map[string]string{"app": "a"})
	create(t, c.Dynamic().Resource(cmGVR).Namespace("ns"), u)
	md := metadata.NewForConfigOrDie(startServer(t, c, "meta").Config()).Resource(cmGVR).Namespace("ns")

	got, err := md.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["app"] != "a" || got.UID == "" || got.ResourceVersion == "" {
		t.Errorf("get = %+v", got)
	}
	list, err := md.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.ResourceVersion == "" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	patched, err := md.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"b"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels["app"] != "b" {
		t.Fatalf("patch = %+v, %v", patched, err)
	}
	if err := md.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := md.Get(ctx, "a", metav1.GetOptions{}); errKind(err) != "NotFound" {
		t.Errorf("get after delete: %v", err)
	}
	for _, a := range c.Actions()[1:] { // after the fixture's create
		// A metadata client's delete asks for nothing that tells it apart.
		if (!a.Metadata && a.GetVerb() != "delete") || a.Actor != "meta" {
			t.Errorf("%s %s: actor %q, metadata %v", a.GetVerb(), a.Name, a.Actor, a.Metadata)
		}
	}
}
