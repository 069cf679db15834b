package handofftest

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
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
