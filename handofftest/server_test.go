package handofftest

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// errKind names the API error class of err, for comparing in tables.
func errKind(err error) string {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return ""
	case apierrors.IsNotFound(err):
		return "NotFound"
	case apierrors.IsAlreadyExists(err):
		return "AlreadyExists"
	case apierrors.IsConflict(err):
		return "Conflict"
	case apierrors.IsInvalid(err):
		return "Invalid"
	case apierrors.IsBadRequest(err):
		return "BadRequest"
	case apierrors.IsUnsupportedMediaType(err):
		return "UnsupportedMediaType"
	case apierrors.IsMethodNotSupported(err):
		return "MethodNotSupported"
	case errors.As(err, &status):
		return strconv.Itoa(int(status.Status().Code))
	}
	return err.Error()
}

func TestCreate(t *testing.T) {
	withRV := configMap("ns", "rv")
	withRV.SetResourceVersion("7")
	noName := configMap("ns", "")
	twoControllers := configMap("ns", "owned")
	twoControllers.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "1", Controller: ptr(true)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: "2", Controller: ptr(true)},
	})
	badRef := configMap("ns", "badref")
	badRef.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}})
	wrongKind := object("v1", "Secret", "ns", "s")

	tests := map[string]struct {
		obj  *unstructured.Unstructured
		want string
	}{
		"a new object":                     {obj: configMap("ns", "new")},
		"an existing name":                 {obj: configMap("ns", "existing"), want: "AlreadyExists"},
		"a resourceVersion":                {obj: withRV, want: "BadRequest"},
		"neither name nor generateName":    {obj: noName, want: "Invalid"},
		"two controller references":        {obj: twoControllers, want: "Invalid"},
		"an owner reference without uid":   {obj: badRef, want: "Invalid"},
		"a kind other than the resource's": {obj: wrongKind, want: "BadRequest"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			ri := c.Dynamic().Resource(cmGVR).Namespace("ns")
			create(t, ri, configMap("ns", "existing"))
			_, err := ri.Create(context.Background(), tt.obj, metav1.CreateOptions{})
			if got := errKind(err); got != tt.want {
				t.Errorf("error = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestCreateAssignsSystemFields(t *testing.T) {
	c := newCluster(t)
	ri := c.Dynamic().Resource(setGVR)
	in := installerSet("set")
	in.SetUID("client-chosen")
	in.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	a := create(t, ri, in)
	b := create(t, ri, installerSet("other"))

	if a.GetUID() == "client-chosen" || a.GetUID() == "" || a.GetUID() == b.GetUID() {
		t.Errorf("uids = %q, %q: want fresh distinct uids", a.GetUID(), b.GetUID())
	}
	if a.GetGeneration() != 1 {
		t.Errorf("generation = %d, want 1", a.GetGeneration())
	}
	if ts := a.GetCreationTimestamp(); !ts.Time.Equal(t0.Add(1e9)) {
		t.Errorf("creationTimestamp = %s, want %s", ts, t0.Add(1e9))
	}
	ra, _ := strconv.Atoi(a.GetResourceVersion())
	rb, _ := strconv.Atoi(b.GetResourceVersion())
	if ra <= 0 || rb <= ra {
		t.Errorf("resourceVersions = %s, %s: want increasing", a.GetResourceVersion(), b.GetResourceVersion())
	}
	if _, ok := a.Object["status"]; ok {
		t.Error("create kept the status; the status subresource should drop it")
	}
	if a.GetAPIVersion() != "operator.tekton.dev/v1alpha1" || a.GetKind() != "TektonInstallerSet" {
		t.Errorf("apiVersion, kind = %s, %s", a.GetAPIVersion(), a.GetKind())
	}
}

func TestGenerateName(t *testing.T) {
	names := func(seed int64) []string {
		c := newCluster(t, WithSeed(seed))
		var out []string
		for range 3 {
			u := installerSet("")
			u.SetGenerateName("pipeline-main-static-")
			out = append(out, create(t, c.Dynamic().Resource(setGVR), u).GetName())
		}
		return out
	}
	first := names(7)
	re := regexp.MustCompile(`^pipeline-main-static-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	seen := map[string]bool{}
	for _, n := range first {
		if !re.MatchString(n) {
			t.Errorf("name %q does not look generated", n)
		}
		if seen[n] {
			t.Errorf("name %q generated twice", n)
		}
		seen[n] = true
	}
	if diff := cmp.Diff(first, names(7)); diff != "" {
		t.Errorf("same seed, different names (-first +second):\n%s", diff)
	}
	if cmp.Equal(first, names(8)) {
		t.Error("different seeds gave the same names")
	}
}

func TestUpdate(t *testing.T) {
	tests := map[string]struct {
		status  bool
		mutate  func(u *unstructured.Unstructured)
		wantErr string
		wantGen int64
		noop    bool
	}{
		"a spec change bumps the generation": {
			mutate:  func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"manifests": []any{"x"}} },
			wantGen: 2,
		},
		"a label change does not": {
			mutate:  func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) },
			wantGen: 1,
		},
		"an empty resourceVersion is unconditional": {
			mutate:  func(u *unstructured.Unstructured) { u.SetResourceVersion(""); u.SetLabels(map[string]string{"a": "b"}) },
			wantGen: 1,
		},
		"a stale resourceVersion conflicts": {
			mutate:  func(u *unstructured.Unstructured) { u.SetResourceVersion("1") },
			wantErr: "Conflict",
		},
		"a changed uid is invalid": {
			mutate:  func(u *unstructured.Unstructured) { u.SetUID("other") },
			wantErr: "Invalid",
		},
		"an empty uid keeps the uid": {
			mutate:  func(u *unstructured.Unstructured) { u.SetUID(""); u.SetLabels(map[string]string{"a": "b"}) },
			wantGen: 1,
		},
		"a status change through the main resource is ignored": {
			mutate: func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"phase": "forged"} },
			noop:   true,
		},
		"system fields cannot be set": {
			mutate: func(u *unstructured.Unstructured) {
				u.SetGeneration(9)
				u.SetCreationTimestamp(metav1.Time{Time: t0})
			},
			noop: true,
		},
		"an identical object is a no-op": {
			mutate: func(*unstructured.Unstructured) {},
			noop:   true,
		},
		"a status update changes only the status": {
			status: true,
			mutate: func(u *unstructured.Unstructured) {
				u.Object["status"] = map[string]any{"phase": "new"}
				u.Object["spec"] = map[string]any{"ignored": true}
				u.SetLabels(map[string]string{"ignored": "yes"})
			},
			wantGen: 1,
		},
		"a status update with a stale resourceVersion conflicts": {
			status:  true,
			mutate:  func(u *unstructured.Unstructured) { u.SetResourceVersion("1") },
			wantErr: "Conflict",
		},
		"an update of a missing object": {
			mutate:  func(u *unstructured.Unstructured) { u.SetName("missing") },
			wantErr: "NotFound",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			ri := c.Dynamic().Resource(setGVR)
			create(t, ri, installerSet("other")) // so that resourceVersion 1 is stale
			orig := create(t, ri, installerSet("set"))
			orig, err := ri.UpdateStatus(context.Background(), withPhase(orig, "old"), metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			in := orig.DeepCopy()
			tt.mutate(in)
			var got *unstructured.Unstructured
			if tt.status {
				got, err = ri.UpdateStatus(context.Background(), in, metav1.UpdateOptions{})
			} else {
				got, err = ri.Update(context.Background(), in, metav1.UpdateOptions{})
			}
			if kind := errKind(err); kind != tt.wantErr {
				t.Fatalf("error = %q (%v), want %q", kind, err, tt.wantErr)
			}
			stored, _ := c.Get(KeyOf(orig))
			if err != nil {
				if diff := cmp.Diff(orig.Object, stored.Object); diff != "" {
					t.Errorf("a failed update changed the object (-before +after):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(stored.Object, got.Object); diff != "" {
				t.Errorf("returned object differs from the stored one (-stored +returned):\n%s", diff)
			}
			if tt.noop {
				if diff := cmp.Diff(orig.Object, stored.Object); diff != "" {
					t.Errorf("a no-op update changed the object (-before +after):\n%s", diff)
				}
				return
			}
			if got.GetResourceVersion() == orig.GetResourceVersion() {
				t.Error("resourceVersion did not change")
			}
			if got.GetUID() != orig.GetUID() {
				t.Errorf("uid = %s, want %s", got.GetUID(), orig.GetUID())
			}
			if got.GetGeneration() != tt.wantGen {
				t.Errorf("generation = %d, want %d", got.GetGeneration(), tt.wantGen)
			}
			wantStatus := orig.Object["status"]
			if tt.status {
				wantStatus = in.Object["status"]
				if diff := cmp.Diff(orig.Object["spec"], got.Object["spec"]); diff != "" {
					t.Errorf("a status update changed the spec:\n%s", diff)
				}
				if len(got.GetLabels()) != 0 {
					t.Errorf("a status update changed the labels: %v", got.GetLabels())
				}
			}
			if diff := cmp.Diff(wantStatus, got.Object["status"]); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func withPhase(u *unstructured.Unstructured, phase string) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.Object["status"] = map[string]any{"phase": phase}
	return u
}

func TestPatch(t *testing.T) {
	tests := map[string]struct {
		pt      types.PatchType
		data    string
		status  bool
		wantErr string
		wantGen int64
		check   func(t *testing.T, got *unstructured.Unstructured)
	}{
		"a merge patch of the spec": {
			pt: types.MergePatchType, data: `{"spec":{"manifests":["a"]}}`, wantGen: 2,
		},
		"a json patch of the spec": {
			pt: types.JSONPatchType, data: `[{"op":"add","path":"/spec/manifests/-","value":"b"}]`, wantGen: 2,
		},
		"a merge patch of metadata": {
			pt: types.MergePatchType, data: `{"metadata":{"labels":{"x":"y"}}}`, wantGen: 1,
			check: func(t *testing.T, got *unstructured.Unstructured) {
				if got.GetLabels()["x"] != "y" {
					t.Errorf("labels = %v", got.GetLabels())
				}
			},
		},
		"a stale resourceVersion in the patch conflicts": {
			pt: types.MergePatchType, data: `{"metadata":{"resourceVersion":"1"},"spec":{"x":1}}`, wantErr: "Conflict",
		},
		"a json patch test of a stale resourceVersion fails": {
			pt: types.JSONPatchType, data: `[{"op":"test","path":"/metadata/resourceVersion","value":"1"}]`, wantErr: "Invalid",
		},
		"a changed uid is invalid": {
			pt: types.MergePatchType, data: `{"metadata":{"uid":"other"}}`, wantErr: "Invalid",
		},
		"a changed name is refused": {
			pt: types.MergePatchType, data: `{"metadata":{"name":"other"}}`, wantErr: "BadRequest",
		},
		"a strategic merge patch is not supported": {
			pt: types.StrategicMergePatchType, data: `{"spec":{}}`, wantErr: "UnsupportedMediaType",
		},
		"a malformed patch": {
			pt: types.JSONPatchType, data: `{`, wantErr: "BadRequest",
		},
		"a status patch changes only the status": {
			pt: types.MergePatchType, data: `{"spec":{"x":1},"status":{"phase":"patched"}}`, status: true, wantGen: 1,
			check: func(t *testing.T, got *unstructured.Unstructured) {
				if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "patched" {
					t.Errorf("status.phase = %q", phase)
				}
				if _, ok, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "x"); ok {
					t.Error("a status patch changed the spec")
				}
			},
		},
		"a main patch of the status is ignored": {
			pt: types.MergePatchType, data: `{"status":{"phase":"forged"}}`, wantGen: 1,
			check: func(t *testing.T, got *unstructured.Unstructured) {
				if _, ok := got.Object["status"]; ok {
					t.Error("a patch of the main resource wrote the status")
				}
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			ri := c.Dynamic().Resource(setGVR)
			create(t, ri, installerSet("other"))
			orig := create(t, ri, installerSet("set"))
			var sub []string
			if tt.status {
				sub = []string{"status"}
			}
			got, err := ri.Patch(context.Background(), "set", tt.pt, []byte(tt.data), metav1.PatchOptions{}, sub...)
			if kind := errKind(err); kind != tt.wantErr {
				t.Fatalf("error = %q (%v), want %q", kind, err, tt.wantErr)
			}
			if err != nil {
				stored, _ := c.Get(KeyOf(orig))
				if diff := cmp.Diff(orig.Object, stored.Object); diff != "" {
					t.Errorf("a failed patch changed the object (-before +after):\n%s", diff)
				}
				return
			}
			if got.GetGeneration() != tt.wantGen {
				t.Errorf("generation = %d, want %d", got.GetGeneration(), tt.wantGen)
			}
			if got.GetUID() != orig.GetUID() {
				t.Errorf("uid changed to %s", got.GetUID())
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
	t.Run("a patch of a missing object", func(t *testing.T) {
		c := newCluster(t)
		_, err := c.Dynamic().Resource(setGVR).Patch(context.Background(), "missing", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("got %v, want NotFound", err)
		}
	})
}

func TestFinalizers(t *testing.T) {
	tests := map[string]struct {
		finalizers []string
		write      func(t *testing.T, c *Cluster, u *unstructured.Unstructured) error
		wantErr    string
		wantExists bool
	}{
		"removing the last finalizer by update removes the object": {
			finalizers: []string{"a"},
			write: func(t *testing.T, c *Cluster, u *unstructured.Unstructured) error {
				u.SetFinalizers(nil)
				_, err := c.Dynamic().Resource(setGVR).Update(context.Background(), u, metav1.UpdateOptions{})
				return err
			},
		},
		"removing the last finalizer by json patch removes the object": {
			finalizers: []string{"a"},
			write: func(t *testing.T, c *Cluster, u *unstructured.Unstructured) error {
				_, err := c.Dynamic().Resource(setGVR).Patch(context.Background(), u.GetName(), types.JSONPatchType,
					[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
				return err
			},
		},
		"removing one of two finalizers keeps it": {
			finalizers: []string{"a", "b"},
			write: func(t *testing.T, c *Cluster, u *unstructured.Unstructured) error {
				_, err := c.Dynamic().Resource(setGVR).Patch(context.Background(), u.GetName(), types.MergePatchType,
					[]byte(`{"metadata":{"finalizers":["b"]}}`), metav1.PatchOptions{})
				return err
			},
			wantExists: true,
		},
		"a new finalizer is forbidden": {
			finalizers: []string{"a"},
			write: func(t *testing.T, c *Cluster, u *unstructured.Unstructured) error {
				u.SetFinalizers([]string{"a", "b"})
				_, err := c.Dynamic().Resource(setGVR).Update(context.Background(), u, metav1.UpdateOptions{})
				return err
			},
			wantErr:    "Invalid",
			wantExists: true,
		},
		"other writes are allowed": {
			finalizers: []string{"a"},
			write: func(t *testing.T, c *Cluster, u *unstructured.Unstructured) error {
				_, err := c.Dynamic().Resource(setGVR).UpdateStatus(context.Background(), withPhase(u, "finalizing"), metav1.UpdateOptions{})
				return err
			},
			wantExists: true,
		},
		"a second delete is a no-op": {
			finalizers: []string{"a"},
			write: func(t *testing.T, c *Cluster, u *unstructured.Unstructured) error {
				return c.Dynamic().Resource(setGVR).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
			},
			wantExists: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			ri := c.Dynamic().Resource(setGVR)
			created := create(t, ri, installerSet("set", tt.finalizers...))
			if err := ri.Delete(context.Background(), "set", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deleting, err := ri.Get(context.Background(), "set", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("an object with finalizers is gone after delete: %v", err)
			}
			if ts := deleting.GetDeletionTimestamp(); ts == nil || !ts.Time.Equal(c.Now().Add(-1e9)) {
				t.Errorf("deletionTimestamp = %v, want the time of the delete", ts)
			}
			if deleting.GetGeneration() != created.GetGeneration()+1 {
				t.Errorf("generation = %d, want %d: setting deletionTimestamp bumps it", deleting.GetGeneration(), created.GetGeneration()+1)
			}
			list, err := ri.List(context.Background(), metav1.ListOptions{})
			if err != nil || len(list.Items) != 1 {
				t.Fatalf("list = %v, %v; want the deleting object", list, err)
			}
			err = tt.write(t, c, deleting)
			if kind := errKind(err); kind != tt.wantErr {
				t.Fatalf("error = %q (%v), want %q", kind, err, tt.wantErr)
			}
			if got := c.Exists(KeyOf(deleting)); got != tt.wantExists {
				t.Errorf("exists = %v, want %v", got, tt.wantExists)
			}
		})
	}
}

func TestDeletePreconditions(t *testing.T) {
	tests := map[string]struct {
		pre     func(u *unstructured.Unstructured) *metav1.Preconditions
		wantErr string
	}{
		"matching uid": {
			pre: func(u *unstructured.Unstructured) *metav1.Preconditions {
				uid := u.GetUID()
				return &metav1.Preconditions{UID: &uid}
			},
		},
		"other uid": {
			pre: func(*unstructured.Unstructured) *metav1.Preconditions {
				return &metav1.Preconditions{UID: ptr(types.UID("x"))}
			},
			wantErr: "Conflict",
		},
		"matching resourceVersion": {
			pre: func(u *unstructured.Unstructured) *metav1.Preconditions {
				return &metav1.Preconditions{ResourceVersion: ptr(u.GetResourceVersion())}
			},
		},
		"stale resourceVersion": {
			pre: func(*unstructured.Unstructured) *metav1.Preconditions {
				return &metav1.Preconditions{ResourceVersion: ptr("1")}
			},
			wantErr: "Conflict",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			ri := c.Dynamic().Resource(setGVR)
			create(t, ri, installerSet("other"))
			u := create(t, ri, installerSet("set"))
			err := ri.Delete(context.Background(), "set", metav1.DeleteOptions{Preconditions: tt.pre(u)})
			if kind := errKind(err); kind != tt.wantErr {
				t.Fatalf("error = %q (%v), want %q", kind, err, tt.wantErr)
			}
			if got, want := c.Exists(KeyOf(u)), err != nil; got != want {
				t.Errorf("exists = %v, want %v", got, want)
			}
		})
	}
	t.Run("missing object", func(t *testing.T) {
		c := newCluster(t)
		if err := c.Dynamic().Resource(setGVR).Delete(context.Background(), "missing", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("got %v, want NotFound", err)
		}
	})
}

func TestList(t *testing.T) {
	c := newCluster(t)
	for _, u := range []*unstructured.Unstructured{configMap("a", "x"), configMap("a", "y"), configMap("b", "x")} {
		u.SetLabels(map[string]string{"name": u.GetName()})
		create(t, c.Dynamic().Resource(cmGVR).Namespace(u.GetNamespace()), u)
	}
	create(t, c.Dynamic().Resource(setGVR), installerSet("x"))
	tests := map[string]struct {
		ns      string
		opts    metav1.ListOptions
		want    []string
		wantErr string
	}{
		"one namespace":           {ns: "a", want: []string{"a/x", "a/y"}},
		"all namespaces":          {want: []string{"a/x", "a/y", "b/x"}},
		"label selector":          {opts: metav1.ListOptions{LabelSelector: "name=x"}, want: []string{"a/x", "b/x"}},
		"field selector":          {opts: metav1.ListOptions{FieldSelector: "metadata.namespace=b"}, want: []string{"b/x"}},
		"bad label selector":      {opts: metav1.ListOptions{LabelSelector: "=="}, wantErr: "BadRequest"},
		"unsupported field":       {opts: metav1.ListOptions{FieldSelector: "spec.x=1"}, wantErr: "BadRequest"},
		"no match in namespace c": {ns: "c"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			list, err := c.Dynamic().Resource(cmGVR).Namespace(tt.ns).List(context.Background(), tt.opts)
			if kind := errKind(err); kind != tt.wantErr {
				t.Fatalf("error = %q (%v), want %q", kind, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			var got []string
			for _, it := range list.Items {
				got = append(got, it.GetNamespace()+"/"+it.GetName())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
			if list.GetKind() != "ConfigMapList" || list.GetResourceVersion() == "" {
				t.Errorf("kind, resourceVersion = %q, %q", list.GetKind(), list.GetResourceVersion())
			}
		})
	}
}

func TestDeleteCollection(t *testing.T) {
	c := newCluster(t)
	ri := c.Dynamic().Resource(cmGVR).Namespace("ns")
	for _, name := range []string{"a", "b", "c"} {
		u := configMap("ns", name)
		u.SetLabels(map[string]string{"drop": strconv.FormatBool(name != "c")})
		create(t, ri, u)
	}
	if err := ri.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "drop=true"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range c.Objects() {
		got = append(got, u.GetName())
	}
	if diff := cmp.Diff([]string{"c"}, got); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
}

func TestUnsupported(t *testing.T) {
	c := newCluster(t)
	ri := c.Dynamic().Resource(cmGVR).Namespace("ns")
	tests := map[string]func() error{
		"apply": func() error {
			_, err := ri.Apply(context.Background(), "a", configMap("ns", "a"), metav1.ApplyOptions{FieldManager: "m"})
			return err
		},
		"dry run": func() error {
			_, err := ri.Create(context.Background(), configMap("ns", "a"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		},
		"an unknown subresource": func() error {
			_, err := ri.Get(context.Background(), "a", metav1.GetOptions{}, "scale")
			return err
		},
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			err := call()
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Code < http.StatusBadRequest {
				t.Errorf("got %v, want an API error", err)
			}
		})
	}
	if len(c.Objects()) != 0 {
		t.Errorf("unsupported calls stored objects: %v", c.Objects())
	}
}
