package handofftest

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
)

// startServer starts a server over c acting as actor, closed when the test ends.
func startServer(t *testing.T, c *Cluster, actor string) *Server {
	t.Helper()
	s := c.Serve(actor)
	t.Cleanup(s.Close)
	return s
}

func httpDynamic(t *testing.T, s *Server) dynamic.Interface {
	t.Helper()
	return dynamic.NewForConfigOrDie(s.Config())
}

// served lists "group/version resource namespaced verbs" for every
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

// rawGet gets path with an Accept header and returns the status code.
func rawGet(t *testing.T, s *Server, path, accept string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestServeNegotiation(t *testing.T) {
	c := newCluster(t)
	s := startServer(t, c, "client")
	tests := map[string]struct {
		path, accept string
		want         int
	}{
		"plain JSON":                                {"/api/v1/configmaps", "application/json", http.StatusOK},
		"protobuf first, JSON after":                {"/api/v1/configmaps", "application/vnd.kubernetes.protobuf,application/json", http.StatusOK},
		"a table alone is not acceptable":           {"/api/v1/configmaps", "application/json;as=Table;v=v1;g=meta.k8s.io", http.StatusNotAcceptable},
		"a table, then JSON":                        {"/api/v1/configmaps", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", http.StatusOK},
		"protobuf alone is not acceptable":          {"/api/v1/configmaps", "application/vnd.kubernetes.protobuf", http.StatusNotAcceptable},
		"aggregated discovery, then legacy":         {"/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", http.StatusOK},
		"a path the API does not have":              {"/apis/apps/v1/namespaces/ns/deployments/a/scale/more", "application/json", http.StatusNotFound},
		"a group the cluster does not serve":        {"/apis/example.com", "application/json", http.StatusNotFound},
		"a resource the cluster does not serve":     {"/apis/apps/v1/replicasets", "application/json", http.StatusNotFound},
		"the legacy watch path of a missing object": {"/api/v1/watch/namespaces/ns/configmaps/a?timeoutSeconds=1", "application/json", http.StatusOK},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := rawGet(t, s, tt.path, tt.accept); got != tt.want {
				t.Errorf("GET %s (Accept %s) = %d, want %d", tt.path, tt.accept, got, tt.want)
			}
		})
	}
}

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

func TestServeRecordsCalls(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	c.InjectFaults(FailNth(2, BeforeCommit, nil), "http")
	ri := httpDynamic(t, startServer(t, c, "http")).Resource(cmGVR).Namespace("ns")
	if _, err := ri.Create(ctx, configMap("ns", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Get(ctx, "a", metav1.GetOptions{}); errKind(err) != "500" {
		t.Errorf("the second call, failed by a fault: got %v, want 500", err)
	}
	if err := ri.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	md := metadata.NewForConfigOrDie(startServer(t, c, "http").Config())
	if _, err := md.Resource(cmGVR).Namespace("ns").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	type call struct {
		Actor, Verb, Resource, Name string
		Failed, Metadata            bool
	}
	var got []call
	for _, a := range c.Actions() {
		got = append(got, call{a.Actor, a.GetVerb(), a.GetResource().Resource, a.Name, a.Err != nil, a.Metadata})
	}
	want := []call{
		{"http", "create", "configmaps", "a", false, false},
		{"http", "get", "configmaps", "a", true, false},
		{"http", "delete", "configmaps", "a", false, false},
		{"http", "list", "configmaps", "", false, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	var writers []string
	for _, w := range c.Writes() {
		writers = append(writers, w.Actor+" "+w.Verb+" "+string(w.Effect))
	}
	if diff := cmp.Diff([]string{"http create created", "http delete removed"}, writers); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
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
