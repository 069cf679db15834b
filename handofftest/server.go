package handofftest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds the API-server semantics of creates, updates and patches,
// and what every request shares; server_read.go and server_delete.go hold
// the rest. Every function here runs with c.mu held.

// resolve returns the registration of gvr and checks the namespace of the
// request against its scope; allNamespaces allows an empty namespace for
// a namespaced resource (list, deletecollection).
func (c *Cluster) resolve(gvr schema.GroupVersionResource, ns string, allNamespaces bool) (kindInfo, error) {
	k, ok := c.kinds[gvr]
	if !ok {
		return kindInfo{}, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusNotFound,
			Reason:  metav1.StatusReasonNotFound,
			Message: fmt.Sprintf("the server could not find the requested resource (handofftest: %s is not registered)", gvr),
			Details: &metav1.StatusDetails{Group: gvr.Group, Kind: gvr.Resource},
		}}
	}
	switch {
	case k.namespaced && ns == "" && !allNamespaces:
		return k, apierrors.NewBadRequest(fmt.Sprintf("handofftest: %s is namespaced: the request needs a namespace", gvr.GroupResource()))
	case !k.namespaced && ns != "":
		return k, apierrors.NewBadRequest(fmt.Sprintf("handofftest: %s is cluster-scoped: the request must not have a namespace", gvr.GroupResource()))
	}
	return k, nil
}

func (k kindInfo) key(ns, name string) Key {
	if !k.namespaced {
		ns = ""
	}
	return Key{Group: k.gvr.Group, Kind: k.kind, Namespace: ns, Name: name}
}

// prepare turns a request body into an object of kind k in namespace ns,
// with JSON-typed values as a real client would send.
func prepare(k kindInfo, ns string, in *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if in == nil {
		return nil, apierrors.NewBadRequest("handofftest: no object in the request")
	}
	obj, err := normalize(in.Object)
	if err != nil {
		return nil, err
	}
	gvk := obj.GroupVersionKind()
	if gvk.Kind != "" && gvk.Kind != k.kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("handofftest: the object's kind %q does not match the resource's kind %q", gvk.Kind, k.kind))
	}
	if obj.GetAPIVersion() != "" && gvk.Group != k.gvr.Group {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("handofftest: the object's apiVersion %q does not match the resource's group %q", obj.GetAPIVersion(), k.gvr.Group))
	}
	obj.SetGroupVersionKind(k.gvk())
	switch {
	case !k.namespaced:
		obj.SetNamespace("")
	case obj.GetNamespace() == "":
		obj.SetNamespace(ns)
	case obj.GetNamespace() != ns:
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return obj, nil
}

// normalize deep-copies content through JSON, so that it holds only JSON
// types (int64, float64, string, bool, maps and slices).
func normalize(content map[string]any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(content)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("handofftest: encoding the object: %v", err))
	}
	return decode(data)
}

func decode(data []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("handofftest: decoding the object: %v", err))
	}
	if m == nil {
		return nil, apierrors.NewBadRequest("handofftest: the object is null")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func dryRunError(dryRun []string) error {
	if len(dryRun) == 0 {
		return nil
	}
	return apierrors.NewBadRequest("handofftest: dryRun is not supported")
}

func subresourceError(gr schema.GroupResource, name string, sub []string, allowStatus bool) error {
	switch {
	case len(sub) == 0:
		return nil
	case len(sub) == 1 && sub[0] == "status" && allowStatus:
		return nil
	}
	gr.Resource += "/" + strings.Join(sub, "/")
	return apierrors.NewNotFound(gr, name)
}

// validateMeta checks what the real server checks of metadata written by
// clients: well-formed owner references with at most one controller.
func validateMeta(k kindInfo, obj *unstructured.Unstructured) error {
	var errs field.ErrorList
	path := field.NewPath("metadata", "ownerReferences")
	controllers := 0
	for i, r := range obj.GetOwnerReferences() {
		p := path.Index(i)
		if r.APIVersion == "" {
			errs = append(errs, field.Required(p.Child("apiVersion"), "must not be empty"))
		}
		if r.Kind == "" {
			errs = append(errs, field.Required(p.Child("kind"), "must not be empty"))
		}
		if r.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "must not be empty"))
		}
		if r.UID == "" {
			errs = append(errs, field.Required(p.Child("uid"), "must not be empty"))
		}
		if r.Controller != nil && *r.Controller {
			controllers++
		}
	}
	if controllers > 1 {
		errs = append(errs, field.Invalid(path, controllers, "Only one reference can have Controller set to true"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(k.groupKind(), obj.GetName(), errs)
	}
	return nil
}

// generateName returns a free name for base, like the real server: base
// cut to 58 characters plus 5 random characters.
func (c *Cluster) generateName(k kindInfo, ns, base string) (string, error) {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	if len(base) > 58 {
		base = base[:58]
	}
	for range 8 {
		b := []byte(base)
		for range 5 {
			b = append(b, alphabet[c.rand.Intn(len(alphabet))])
		}
		if _, taken := c.objects[k.key(ns, string(b))]; !taken {
			return string(b), nil
		}
	}
	return "", apierrors.NewGenerateNameConflict(k.gvr.GroupResource(), base, 1)
}

func (c *Cluster) create(ev event, gvr schema.GroupVersionResource, ns string, in *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	if err := dryRunError(opts.DryRun); err != nil {
		return nil, err
	}
	k, err := c.resolve(gvr, ns, false)
	if err != nil {
		return nil, err
	}
	obj, err := prepare(c.storage(k), ns, in)
	if err != nil {
		return nil, err
	}
	if obj.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if err := c.admitNamespace(k, obj); err != nil {
		return nil, err
	}
	if obj.GetName() == "" {
		if obj.GetGenerateName() == "" {
			return nil, apierrors.NewInvalid(k.groupKind(), "", field.ErrorList{
				field.Required(field.NewPath("metadata", "name"), "name or generateName is required"),
			})
		}
		name, err := c.generateName(k, obj.GetNamespace(), obj.GetGenerateName())
		if err != nil {
			return nil, err
		}
		obj.SetName(name)
	}
	key := k.key(obj.GetNamespace(), obj.GetName())
	if _, ok := c.objects[key]; ok {
		return nil, apierrors.NewAlreadyExists(k.gvr.GroupResource(), obj.GetName())
	}
	if err := validateMeta(k, obj); err != nil {
		return nil, err
	}
	obj.SetUID(types.UID(c.nextUID()))
	obj.SetCreationTimestamp(metav1.NewTime(ev.now))
	obj.SetGeneration(1)
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	delete(obj.Object, "status")
	if err := checkLimits(k, obj); err != nil {
		return nil, err
	}
	c.store(ev, Created, key, obj)
	c.afterWrite(ev)
	return as(k, obj.DeepCopy()), nil
}

// seed stores a fixture for Add.
func (c *Cluster) seed(in *unstructured.Unstructured, now time.Time) error {
	obj, err := normalize(in.Object)
	if err != nil {
		return fmt.Errorf("handofftest: add %s: %w", KeyOf(in), err)
	}
	gk := obj.GroupVersionKind().GroupKind()
	k, ok := c.byGK[gk]
	if !ok {
		return fmt.Errorf("handofftest: add %s: kind %s is not registered", KeyOf(obj), gk)
	}
	obj.SetGroupVersionKind(k.gvk())
	switch {
	case !k.namespaced:
		obj.SetNamespace("")
	case obj.GetNamespace() == "":
		return fmt.Errorf("handofftest: add %s: a namespaced object needs a namespace", KeyOf(obj))
	}
	if obj.GetName() == "" {
		return fmt.Errorf("handofftest: add %s: the object needs a name", KeyOf(obj))
	}
	if err := c.admitNamespace(k, obj); err != nil {
		return fmt.Errorf("handofftest: add %s: %w", KeyOf(obj), err)
	}
	key := KeyOf(obj)
	if _, ok := c.objects[key]; ok {
		return fmt.Errorf("handofftest: add %s: %w", key, apierrors.NewAlreadyExists(k.gvr.GroupResource(), obj.GetName()))
	}
	if err := validateMeta(k, obj); err != nil {
		return fmt.Errorf("handofftest: add %s: %w", key, err)
	}
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
		return fmt.Errorf("handofftest: add %s: a deletionTimestamp needs finalizers", key)
	}
	if obj.GetUID() == "" {
		obj.SetUID(types.UID(c.nextUID()))
	}
	if ts := obj.GetCreationTimestamp(); ts.IsZero() {
		obj.SetCreationTimestamp(metav1.NewTime(now))
	}
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
	if err := checkLimits(k, obj); err != nil {
		return fmt.Errorf("handofftest: add %s: %w", key, err)
	}
	ev := event{now: now, actor: SeedActor, verb: "create"}
	c.store(ev, Created, key, obj)
	if obj.GetDeletionTimestamp() != nil {
		tl := c.timelines[key]
		tl[len(tl)-1].Deleting = now
	}
	return nil
}

func (c *Cluster) update(ev event, gvr schema.GroupVersionResource, ns string, in *unstructured.Unstructured, opts metav1.UpdateOptions, sub []string) (*unstructured.Unstructured, error) {
	if err := dryRunError(opts.DryRun); err != nil {
		return nil, err
	}
	k, err := c.resolve(gvr, ns, false)
	if err != nil {
		return nil, err
	}
	obj, err := prepare(c.storage(k), ns, in)
	if err != nil {
		return nil, err
	}
	if obj.GetName() == "" {
		return nil, apierrors.NewBadRequest("name is required")
	}
	if err := subresourceError(gvr.GroupResource(), obj.GetName(), sub, true); err != nil {
		return nil, err
	}
	out, err := c.replace(ev, k, k.key(obj.GetNamespace(), obj.GetName()), obj, len(sub) > 0)
	return as(k, out), err
}

func (c *Cluster) patch(ev event, gvr schema.GroupVersionResource, ns, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub []string) (*unstructured.Unstructured, error) {
	if err := dryRunError(opts.DryRun); err != nil {
		return nil, err
	}
	k, err := c.resolve(gvr, ns, false)
	if err != nil {
		return nil, err
	}
	gr := gvr.GroupResource()
	if err := subresourceError(gr, name, sub, true); err != nil {
		return nil, err
	}
	if pt != types.JSONPatchType && pt != types.MergePatchType {
		// Checked before the object is looked up, as the API server checks
		// the request's content type first: a server-side apply of an object
		// that does not exist is refused the same way.
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", gr, name,
			fmt.Sprintf("handofftest: patch type %q is not supported (use json or merge patch)", pt), 0, false)
	}
	key := k.key(ns, name)
	old, ok := c.objects[key]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	orig, err := json.Marshal(old.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var out []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if out, err = p.Apply(orig); err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", gr, name, err.Error(), 0, false)
		}
	default: // types.MergePatchType, the only other one let through above
		if out, err = jsonpatch.MergePatch(orig, data); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	patched, err := decode(out)
	if err != nil {
		return nil, err
	}
	if patched.GetName() != name || patched.GetNamespace() != old.GetNamespace() {
		return nil, apierrors.NewBadRequest("handofftest: a patch must not change metadata.name or metadata.namespace")
	}
	if patched, err = prepare(c.storage(k), ns, patched); err != nil {
		return nil, err
	}
	res, err := c.replace(ev, k, key, patched, len(sub) > 0)
	return as(k, res), err
}

// replace writes next over the stored object at key, as an update or
// patch of the main resource or, with status, of its status.
func (c *Cluster) replace(ev event, k kindInfo, key Key, next *unstructured.Unstructured, status bool) (*unstructured.Unstructured, error) {
	gr := k.gvr.GroupResource()
	old, ok := c.objects[key]
	if !ok {
		return nil, apierrors.NewNotFound(gr, key.Name)
	}
	if rv := next.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return nil, apierrors.NewConflict(gr, key.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if status {
		// A status write changes only the status.
		st, ok := next.Object["status"]
		next = old.DeepCopy()
		delete(next.Object, "status")
		if ok {
			next.Object["status"] = st
		}
	} else {
		if uid := next.GetUID(); uid != "" && uid != old.GetUID() {
			return nil, apierrors.NewInvalid(k.groupKind(), key.Name, field.ErrorList{
				field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable"),
			})
		}
		next.SetUID(old.GetUID())
		next.SetCreationTimestamp(old.GetCreationTimestamp())
		next.SetDeletionTimestamp(old.GetDeletionTimestamp())
		next.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
		next.SetGeneration(old.GetGeneration())
		delete(next.Object, "status")
		if st, ok := old.Object["status"]; ok {
			next.Object["status"] = st
		}
		if old.GetDeletionTimestamp() != nil {
			for _, f := range next.GetFinalizers() {
				if !slices.Contains(old.GetFinalizers(), f) {
					return nil, apierrors.NewInvalid(k.groupKind(), key.Name, field.ErrorList{
						field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted"),
					})
				}
			}
		}
		if err := validateMeta(k, next); err != nil {
			return nil, err
		}
		if specChanged(old, next) {
			next.SetGeneration(old.GetGeneration() + 1)
		}
	}
	next.SetResourceVersion(old.GetResourceVersion())
	if reflect.DeepEqual(next.Object, old.Object) {
		return old.DeepCopy(), nil
	}
	if err := checkLimits(k, next); err != nil {
		return nil, err
	}
	c.store(ev, Updated, key, next)
	out := next.DeepCopy()
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		c.remove(ev, key)
	}
	c.afterWrite(ev)
	return out, nil
}

// specChanged reports whether anything outside metadata and status
// differs.
func specChanged(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			switch k {
			case "apiVersion", "kind", "metadata", "status":
			default:
				m[k] = v
			}
		}
		return m
	}
	return !reflect.DeepEqual(strip(a), strip(b))
}

// store stores obj at key with a new resourceVersion and records it.
func (c *Cluster) store(ev event, effect Effect, key Key, obj *unstructured.Unstructured) {
	obj.SetResourceVersion(c.nextRV())
	c.objects[key] = obj
	c.record(ev, effect, obj)
}

// remove drops the object at key from storage and records it.
func (c *Cluster) remove(ev event, key Key) {
	obj := c.objects[key]
	delete(c.objects, key)
	obj.SetResourceVersion(c.nextRV())
	c.record(ev, Removed, obj)
}

func (c *Cluster) afterWrite(ev event) {
	if c.autoGC {
		c.collect(ev.now)
	}
}
