package handofftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// This file holds the cluster's HTTP API server: listening, routing,
// content negotiation and errors. http_discovery.go answers discovery,
// http_resource.go the requests for resources.

// Server is an HTTP API server over a [Cluster], started by
// [Cluster.Serve]. It speaks the Kubernetes REST API in JSON on a loopback
// address, so client-go's clients, informers and controller-runtime
// managers can use the cluster as they would a real one. A Server is safe
// for concurrent use.
type Server struct {
	c     *Cluster
	actor string
	url   string

	srv      *http.Server
	cancel   context.CancelFunc
	served   chan struct{} // closed once srv.Serve has returned
	requests sync.WaitGroup
	close    sync.Once
}

// Serve starts an HTTP API server over c on 127.0.0.1, at a port of the
// system's choosing, whose requests act as actor: each request for a
// resource is one call of actor, recorded in [Cluster.Actions],
// [Cluster.Calls] and [Cluster.Writes] and subject to actor's injected
// faults exactly as a call through [Cluster.ClientFor](actor) is. Its
// verb is the API verb of the request (get, list, watch, create, update,
// patch, delete, deletecollection); a request that asks for
// PartialObjectMetadata (Accept as=PartialObjectMetadata or
// as=PartialObjectMetadataList) is a call with Metadata set, as one
// through [Cluster.MetadataFor] is (a metadata client's deletes ask for
// nothing that tells them apart, so they are plain calls). A watch is one watch call when it starts,
// whatever it streams after. Discovery (/api, /apis, …), /version and
// /healthz are not calls, nor are requests refused before they reach the
// cluster: a path the API does not have (404), a body that is not JSON
// (415), an Accept header with no JSON the server can give (406).
//
// What the server answers and refuses:
//
//   - discovery of every kind the cluster serves now, at every version
//     ([Cluster.Register], [Cluster.AddVersion], [Cluster.Unregister]),
//     with the verbs above and a status subresource for each (the cluster
//     serves status for every kind), in the legacy JSON form (clients that
//     ask for aggregated discovery first fall back to it);
//   - get, list (labelSelector, and fieldSelector on metadata.name and
//     metadata.namespace; limit is ignored and every object returned, as a
//     server may), create, update, JSON patch and JSON merge patch, delete
//     with DeleteOptions, deletecollection, and get, update and patch of
//     status, with the cluster's semantics and its errors as metav1.Status
//     with their HTTP code;
//   - watch (?watch=true, or the legacy /watch/ paths), as
//     [k8s.io/client-go/dynamic.ResourceInterface.Watch] on the cluster:
//     newline-delimited JSON events, from a resourceVersion or with the
//     initial events (sendInitialEvents, as client-go's watch-list
//     informers ask), ending with timeoutSeconds, the client going away
//     or [Server.Close]; the one BOOKMARK sent is the one that ends the
//     initial events (allowWatchBookmarks asks for no others);
//   - strategic merge patch and server-side apply with 415
//     UnsupportedMediaType, dryRun with 400 BadRequest, as the cluster
//     refuses them; Accept as=Table with 406 NotAcceptable;
//   - JSON only: a client that asks for protobuf first and JSON after is
//     answered JSON.
//
// Serve panics if it cannot listen, as httptest.NewServer does. Close the
// server when done.
func (c *Cluster) Serve(actor string) *Server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("handofftest: serve: %v", err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{c: c, actor: actor, url: "http://" + l.Addr().String(), cancel: cancel, served: make(chan struct{})}
	s.srv = &http.Server{
		Handler:     http.HandlerFunc(s.handle),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(l) // returns http.ErrServerClosed after Close
	}()
	return s
}

// URL returns the server's base URL, http://127.0.0.1:port.
func (s *Server) URL() string { return s.url }

// Config returns a new client configuration for the server: its Host is
// [Server.URL], with no credentials and no TLS. Callers may change the copy
// they get.
func (s *Server) Config() *rest.Config {
	return &rest.Config{Host: s.url, ContentConfig: rest.ContentConfig{ContentType: "application/json"}, QPS: -1}
}

// Close stops the server: it stops accepting connections, ends open
// watches (their clients see the stream end) and returns once every
// request in flight has returned. Close may be called more than once.
func (s *Server) Close() {
	s.close.Do(func() {
		s.cancel()
		_ = s.srv.Close()
		<-s.served
		s.requests.Wait()
	})
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	defer s.requests.Done()
	if r.Context().Err() != nil { // closing
		writeError(w, apierrors.NewServiceUnavailable("handofftest: the server is closing"))
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.URL.Path == "/version":
		s.version(w, r)
	case r.URL.Path == "/healthz" || r.URL.Path == "/livez" || r.URL.Path == "/readyz":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	case parts[0] == "api" && len(parts) == 1:
		s.coreVersions(w, r)
	case parts[0] == "api" && parts[1] == "v1": // len(parts) > 1 here
		s.resourceRequest(w, r, schema.GroupVersion{Version: "v1"}, parts[2:])
	case parts[0] == "apis" && len(parts) == 1:
		s.groups(w, r)
	case parts[0] == "apis" && len(parts) == 2:
		s.group(w, r, parts[1])
	case parts[0] == "apis": // len(parts) > 2 here
		s.resourceRequest(w, r, schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:])
	default:
		writeError(w, notFoundPath(r))
	}
}

func notFoundPath(r *http.Request) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the requested resource (handofftest: no %s %s)", r.Method, r.URL.Path),
	}}
}

// shape is what an Accept header asks a resource request's answer to be.
type shape struct {
	metadata bool   // PartialObjectMetadata(List) rather than the objects
	version  string // the meta.k8s.io version of the metadata answer
}

// negotiate picks the first media type of an Accept header the server
// can answer: JSON, as the objects or as their metadata. It fails with 406
// NotAcceptable when there is none.
func negotiate(accept string) (shape, error) {
	if strings.TrimSpace(accept) == "" {
		return shape{}, nil
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "application/*", "*/*":
		default:
			continue // protobuf, yaml, cbor
		}
		switch as := params["as"]; {
		case as == "":
			return shape{}, nil
		case (as == "PartialObjectMetadata" || as == "PartialObjectMetadataList") && params["g"] == metav1.GroupName &&
			(params["v"] == "v1" || params["v"] == "v1beta1"):
			return shape{metadata: true, version: params["v"]}, nil
		}
	}
	return shape{}, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: fmt.Sprintf("handofftest: only JSON, as objects or as PartialObjectMetadata, is served; Accept %q asks for neither", accept),
	}}
}

// writeJSON answers v as JSON with the given HTTP code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("handofftest: encoding the response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// statusOf returns the metav1.Status a client is to see for err: its own
// if it is an API error (the first of a joined error that is), 500
// InternalError otherwise.
func statusOf(err error) metav1.Status {
	var api apierrors.APIStatus
	var status metav1.Status
	if errors.As(err, &api) {
		status = api.Status()
	} else {
		status = apierrors.NewInternalError(err).ErrStatus
	}
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if status.Status == "" {
		status.Status = metav1.StatusFailure
	}
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	return status
}

// writeError answers err as a metav1.Status with its HTTP code.
func writeError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	writeJSON(w, int(status.Code), status)
}
