package handofftest

import (
	"fmt"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// This file holds the server's discovery: the legacy (unaggregated) JSON
// documents of /api, /apis and their groups and versions, built from the
// kinds the cluster serves at the time of the request.

// resourceVerbs are the verbs every served resource has.
var resourceVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// served returns the registrations the cluster serves now, in
// registration order.
func (c *Cluster) served() []kindInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]kindInfo, 0, len(c.order))
	for _, gvr := range c.order {
		if k, ok := c.kinds[gvr]; ok {
			out = append(out, k)
		}
	}
	return out
}

// groupVersions returns the groups served, in registration order, each
// with its versions, the first of them preferred as [Cluster.Mapper]
// prefers it.
func groupVersions(kinds []kindInfo) []metav1.APIGroup {
	var groups []metav1.APIGroup
	for _, k := range kinds {
		gv := k.gvr.GroupVersion()
		i := slices.IndexFunc(groups, func(g metav1.APIGroup) bool { return g.Name == gv.Group })
		if i < 0 {
			groups = append(groups, metav1.APIGroup{Name: gv.Group})
			i = len(groups) - 1
		}
		g := &groups[i]
		if slices.ContainsFunc(g.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v.Version == gv.Version }) {
			continue
		}
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version})
		if len(g.Versions) == 1 {
			g.PreferredVersion = g.Versions[0]
		}
	}
	return groups
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, version.Info{
		Major:      "1",
		Minor:      "29",
		GitVersion: "v1.29.0-handofftest",
		GoVersion:  goruntime.Version(),
		Compiler:   goruntime.Compiler,
		Platform:   goruntime.GOOS + "/" + goruntime.GOARCH,
	})
}

func (s *Server) coreVersions(w http.ResponseWriter, r *http.Request) {
	if !acceptsDiscovery(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: strings.TrimPrefix(s.url, "http://")}},
	})
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	if !acceptsDiscovery(w, r) {
		return
	}
	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range groupVersions(s.c.served()) {
		if g.Name != "" {
			list.Groups = append(list.Groups, g)
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) group(w http.ResponseWriter, r *http.Request, name string) {
	if !acceptsDiscovery(w, r) {
		return
	}
	for _, g := range groupVersions(s.c.served()) {
		if g.Name == name && name != "" {
			g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			writeJSON(w, http.StatusOK, g)
			return
		}
	}
	writeError(w, notFoundPath(r))
}

// resources answers the discovery of one group version.
func (s *Server) resources(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion) {
	if !acceptsDiscovery(w, r) {
		return
	}
	list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String(), APIResources: []metav1.APIResource{}}
	for _, k := range s.c.served() {
		if k.gvr.GroupVersion() != gv {
			continue
		}
		list.APIResources = append(list.APIResources,
			metav1.APIResource{Name: k.gvr.Resource, SingularName: strings.ToLower(k.kind), Namespaced: k.namespaced, Kind: k.kind, Verbs: resourceVerbs},
			metav1.APIResource{Name: k.gvr.Resource + "/status", Namespaced: k.namespaced, Kind: k.kind, Verbs: metav1.Verbs{"get", "patch", "update"}},
		)
	}
	if len(list.APIResources) == 0 && gv.Group != "" {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, fmt.Sprintf("version %s", gv.Version)))
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// acceptsDiscovery checks that a discovery request can be answered in the
// legacy JSON form, and answers 406 if not.
func acceptsDiscovery(w http.ResponseWriter, r *http.Request) bool {
	if _, err := negotiate(r.Header.Get("Accept")); err != nil {
		writeError(w, err)
		return false
	}
	return true
}
