package handofftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// This file holds the server's requests for resources. Each is turned into
// one call of the actor's dynamic client, so that the cluster's semantics,
// recording and faults are those of the in-process clients.

// maxBody is the largest request body read; the cluster refuses objects
// far smaller (see MaxObjectBytes) with its own errors.
const maxBody = 16 << 20

// resourceRequest is a request under /api/v1 or /apis/group/version.
type resourceRequest struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	gvr   schema.GroupVersionResource
	ns    string
	name  string
	sub   []string
	shape shape
	ri    dynamic.ResourceInterface
}

func (s *Server) resourceRequest(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) {
	if len(rest) == 0 {
		if r.Method != http.MethodGet {
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: gv.Group}, r.Method))
			return
		}
		s.resources(w, r, gv)
		return
	}
	watching := rest[0] == "watch" // the legacy /watch/ paths
	if watching {
		rest = rest[1:]
	}
	req := &resourceRequest{s: s, w: w, r: r}
	if len(rest) >= 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize" {
		req.ns, rest = rest[1], rest[2:]
	}
	if len(rest) == 0 || len(rest) > 3 || slices.Contains(rest, "") {
		writeError(w, notFoundPath(r))
		return
	}
	req.gvr = gv.WithResource(rest[0])
	if len(rest) > 1 {
		req.name = rest[1]
	}
	if len(rest) > 2 {
		req.sub = rest[2:]
	}
	shape, err := negotiate(r.Header.Get("Accept"))
	if err != nil {
		writeError(w, err)
		return
	}
	req.shape = shape
	nri := (&client{c: s.c, actor: s.actor, meta: shape.metadata}).Resource(req.gvr)
	req.ri = nri
	if req.ns != "" {
		req.ri = nri.Namespace(req.ns)
	}
	if v := r.URL.Query().Get("watch"); v == "true" || v == "1" {
		watching = true
	}
	switch {
	case watching && r.Method == http.MethodGet && req.sub == nil:
		req.watch()
	case r.Method == http.MethodGet && req.name == "":
		req.list()
	case r.Method == http.MethodGet:
		req.get()
	case r.Method == http.MethodPost && req.name == "" && !watching:
		req.create()
	case r.Method == http.MethodPut && req.name != "" && !watching:
		req.update()
	case r.Method == http.MethodPatch && req.name != "" && !watching:
		req.patch()
	case r.Method == http.MethodDelete && req.name != "" && !watching:
		req.delete()
	case r.Method == http.MethodDelete && !watching:
		req.deleteCollection()
	default:
		writeError(w, apierrors.NewMethodNotSupported(req.gvr.GroupResource(), r.Method))
	}
}

func (q *resourceRequest) ctx() context.Context { return q.r.Context() }

// queryCodec decodes the query parameters of requests into the metav1
// option types. (metav1.ParameterCodec's scheme lacks the conversions from
// url.Values; a scheme with metav1 added to a group version has them.)
var queryCodec = func() runtime.ParameterCodec {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, queryVersion)
	return runtime.NewParameterCodec(s)
}()

var queryVersion = schema.GroupVersion{Version: "v1"}

// options decodes the request's query parameters into opts, one of the
// metav1 option types.
func (q *resourceRequest) options(opts runtime.Object) bool {
	if err := queryCodec.DecodeParameters(q.r.URL.Query(), queryVersion, opts); err != nil {
		writeError(q.w, apierrors.NewBadRequest(fmt.Sprintf("handofftest: the query parameters: %v", err)))
		return false
	}
	return true
}

// body reads the request body, which must be JSON unless the caller
// accepts other media types (patches).
func (q *resourceRequest) body(json bool) ([]byte, bool) {
	if json {
		if ct := q.r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				writeError(q.w, unsupportedMedia(ct))
				return nil, false
			}
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(q.w, q.r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(q.w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("handofftest: the request body is over %d bytes", maxBody)))
		return nil, false
	case err != nil:
		writeError(q.w, apierrors.NewBadRequest(fmt.Sprintf("handofftest: reading the request body: %v", err)))
		return nil, false
	}
	return data, true
}

func unsupportedMedia(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("handofftest: the body's Content-Type %q is not supported: only JSON is", ct),
	}}
}

// object reads a JSON object from the request body.
func (q *resourceRequest) object() (*unstructured.Unstructured, bool) {
	data, ok := q.body(true)
	if !ok {
		return nil, false
	}
	obj, err := decode(data)
	if err != nil {
		writeError(q.w, err)
		return nil, false
	}
	return obj, true
}

// answer writes the object a call returned, or its error.
func (q *resourceRequest) answer(code int, obj *unstructured.Unstructured, err error) {
	if err != nil {
		writeError(q.w, err)
		return
	}
	if !q.shape.metadata {
		writeJSON(q.w, code, obj.Object)
		return
	}
	p, err := partialOf(obj)
	if err != nil {
		writeError(q.w, err)
		return
	}
	p.APIVersion = metav1.GroupName + "/" + q.shape.version
	writeJSON(q.w, code, p)
}

func (q *resourceRequest) get() {
	var opts metav1.GetOptions
	if q.options(&opts) {
		obj, err := q.ri.Get(q.ctx(), q.name, opts, q.sub...)
		q.answer(http.StatusOK, obj, err)
	}
}

func (q *resourceRequest) list() {
	var opts metav1.ListOptions
	if !q.options(&opts) {
		return
	}
	list, err := q.ri.List(q.ctx(), opts)
	switch {
	case err != nil:
		writeError(q.w, err)
	case !q.shape.metadata:
		writeJSON(q.w, http.StatusOK, list)
	default:
		p, err := partialListOf(list)
		if err != nil {
			writeError(q.w, err)
			return
		}
		p.APIVersion = metav1.GroupName + "/" + q.shape.version
		writeJSON(q.w, http.StatusOK, p)
	}
}

func (q *resourceRequest) create() {
	var opts metav1.CreateOptions
	if !q.options(&opts) {
		return
	}
	if obj, ok := q.object(); ok {
		made, err := q.ri.Create(q.ctx(), obj, opts)
		q.answer(http.StatusCreated, made, err)
	}
}

func (q *resourceRequest) update() {
	var opts metav1.UpdateOptions
	if !q.options(&opts) {
		return
	}
	obj, ok := q.object()
	if !ok {
		return
	}
	if obj.GetName() != q.name {
		writeError(q.w, apierrors.NewBadRequest(fmt.Sprintf("handofftest: the object's name %q does not match the name %q in the path", obj.GetName(), q.name)))
		return
	}
	out, err := q.ri.Update(q.ctx(), obj, opts, q.sub...)
	q.answer(http.StatusOK, out, err)
}

// patchTypes are the patch media types client-go sends; the cluster
// applies JSON and merge patches and refuses the others with 415.
var patchTypes = map[string]types.PatchType{
	"application/json-patch+json":            types.JSONPatchType,
	"application/merge-patch+json":           types.MergePatchType,
	"application/strategic-merge-patch+json": types.StrategicMergePatchType,
	"application/apply-patch+yaml":           types.ApplyPatchType,
	"application/apply-patch+cbor":           "application/apply-patch+cbor",
}

func (q *resourceRequest) patch() {
	var opts metav1.PatchOptions
	if !q.options(&opts) {
		return
	}
	ct := q.r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	pt, ok := patchTypes[mt]
	if err != nil || !ok {
		writeError(q.w, unsupportedMedia(ct))
		return
	}
	data, ok := q.body(false)
	if !ok {
		return
	}
	out, err := q.ri.Patch(q.ctx(), q.name, pt, data, opts, q.sub...)
	q.answer(http.StatusOK, out, err)
}

// deleteOptions reads DeleteOptions from the body, or from the query
// parameters when the body is empty.
func (q *resourceRequest) deleteOptions() (metav1.DeleteOptions, bool) {
	var opts metav1.DeleteOptions
	data, ok := q.body(true)
	if !ok {
		return opts, false
	}
	if len(data) == 0 {
		return opts, q.options(&opts)
	}
	if err := json.Unmarshal(data, &opts); err != nil {
		writeError(q.w, apierrors.NewBadRequest(fmt.Sprintf("handofftest: decoding DeleteOptions: %v", err)))
		return opts, false
	}
	return opts, true
}

// success answers a delete as the API server does when the object is
// gone or going.
func (q *resourceRequest) success() {
	writeJSON(q.w, http.StatusOK, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Code:     http.StatusOK,
		Details:  &metav1.StatusDetails{Name: q.name, Group: q.gvr.Group, Kind: q.gvr.Resource},
	})
}

func (q *resourceRequest) delete() {
	opts, ok := q.deleteOptions()
	if !ok {
		return
	}
	if err := q.ri.Delete(q.ctx(), q.name, opts, q.sub...); err != nil {
		writeError(q.w, err)
		return
	}
	q.success()
}

func (q *resourceRequest) deleteCollection() {
	var listOpts metav1.ListOptions
	if !q.options(&listOpts) {
		return
	}
	opts, ok := q.deleteOptions()
	if !ok {
		return
	}
	if err := q.ri.DeleteCollection(q.ctx(), opts, listOpts); err != nil {
		writeError(q.w, err)
		return
	}
	q.success()
}

// watch streams the events of a watch as kube-apiserver does: one JSON
// metav1.WatchEvent a line, flushed as it comes, until the watch ends or
// the client goes away.
func (q *resourceRequest) watch() {
	var opts metav1.ListOptions
	if !q.options(&opts) {
		return
	}
	if q.name != "" { // /watch/.../name: the one object
		fs, err := fields.ParseSelector(opts.FieldSelector)
		if err != nil {
			writeError(q.w, apierrors.NewBadRequest(err.Error()))
			return
		}
		opts.FieldSelector = fields.AndSelectors(fs, fields.OneTermEqualSelector("metadata.name", q.name)).String()
	}
	opts.Watch = true
	wi, err := q.ri.Watch(q.ctx(), opts)
	if err != nil {
		writeError(q.w, err)
		return
	}
	defer wi.Stop()
	flusher, _ := q.w.(http.Flusher)
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(q.w)
	for {
		select {
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			if q.shape.metadata {
				ev = partialEvent(ev)
				if p, ok := ev.Object.(*metav1.PartialObjectMetadata); ok {
					p.APIVersion = metav1.GroupName + "/" + q.shape.version
				}
			}
			raw, err := json.Marshal(ev.Object)
			if err != nil {
				return
			}
			if err := enc.Encode(metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw}}); err != nil {
				return // the client went away
			}
			if flusher != nil {
				flusher.Flush()
			}
		case <-q.ctx().Done():
			return
		}
	}
}
