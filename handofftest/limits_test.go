package handofftest

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// withAnnotation returns u with one annotation whose key and value take n
// bytes together.
func withAnnotation(u *unstructured.Unstructured, n int) *unstructured.Unstructured {
	const key = "example.com/big"
	u.SetAnnotations(map[string]string{key: strings.Repeat("a", n-len(key))})
	return u
}

// bigSet returns a set whose JSON is about n bytes.
func bigSet(name string, n int) *unstructured.Unstructured {
	u := installerSet(name)
	u.Object["spec"] = map[string]any{"manifests": []any{}, "padding": strings.Repeat("p", n)}
	return u
}

// The cluster refuses what the API server refuses for its size: all
// annotations of an object over 256 KiB (422 Invalid), a ConfigMap's data
// over 1 MiB (422 Invalid), an object over etcd's 1.5 MiB (413); on
// create, update and patch, and in Add. What it refuses is not stored.
func TestSizeLimits(t *testing.T) {
	ctx := context.Background()
	tooLarge := func(err error) string {
		if apierrors.IsRequestEntityTooLargeError(err) {
			return "TooLarge"
		}
		return errKind(err)
	}
	bigData := func(name string, n int) *unstructured.Unstructured {
		u := configMap("ns", name)
		u.Object["data"] = map[string]any{"k": strings.Repeat("d", n-1)}
		return u
	}
	// (Every verb for the annotations; create and update for the larger
	// objects, which are slow to encode under the race detector.)
	tests := map[string]struct {
		obj   *unstructured.Unstructured
		want  string
		every bool // patch and Add too
	}{
		"annotations at the limit":    {obj: withAnnotation(configMap("ns", "at"), MaxAnnotationBytes), every: true},
		"annotations over the limit":  {obj: withAnnotation(configMap("ns", "over"), MaxAnnotationBytes+1), want: "Invalid", every: true},
		"data at the limit":           {obj: bigData("data-at", MaxDataBytes)},
		"data over the limit":         {obj: bigData("data-over", MaxDataBytes+1), want: "Invalid"},
		"an object under etcd's":      {obj: bigSet("set-under", MaxObjectBytes-1024)},
		"an object over etcd's limit": {obj: bigSet("set-over", MaxObjectBytes), want: "TooLarge"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			gvr, ns := cmGVR, "ns"
			if tt.obj.GetKind() != "ConfigMap" {
				gvr, ns = setGVR, ""
			}
			ri := c.Dynamic().Resource(gvr).Namespace(ns)
			key := KeyOf(tt.obj)

			// Create.
			_, err := ri.Create(ctx, tt.obj, metav1.CreateOptions{})
			if got := tooLarge(err); got != tt.want {
				t.Fatalf("create: error %q (%v), want %q", got, err, tt.want)
			}
			if c.Exists(key) != (tt.want == "") {
				t.Fatalf("create: stored %v, want %v", c.Exists(key), tt.want == "")
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.obj.GetName()) {
				t.Errorf("create: error %q does not name the object", err)
			}

			// Update and patch of a small object to the same size.
			small := tt.obj.DeepCopy()
			small.SetAnnotations(nil)
			delete(small.Object, "data")
			if spec, ok := small.Object["spec"].(map[string]any); ok {
				delete(spec, "padding")
			}
			small.SetName(tt.obj.GetName() + "-2")
			live := create(t, ri, small)
			next := tt.obj.DeepCopy()
			next.SetName(live.GetName())
			next.SetResourceVersion(live.GetResourceVersion())
			_, err = ri.Update(ctx, next, metav1.UpdateOptions{})
			if got := tooLarge(err); got != tt.want {
				t.Errorf("update: error %q (%v), want %q", got, err, tt.want)
			}
			if tt.want != "" {
				k := key
				k.Name = live.GetName()
				if got, _ := c.Get(k); got.GetResourceVersion() != live.GetResourceVersion() {
					t.Errorf("%s stored the refused update", live.GetName())
				}
			}
			if !tt.every {
				return
			}
			second := small.DeepCopy()
			second.SetName(tt.obj.GetName() + "-3")
			live2 := create(t, ri, second)
			p := next.DeepCopy()
			p.SetName(live2.GetName())
			p.SetResourceVersion("")
			body, err := p.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			_, err = ri.Patch(ctx, live2.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
			if got := tooLarge(err); got != tt.want {
				t.Errorf("patch: error %q (%v), want %q", got, err, tt.want)
			}
			if tt.want != "" {
				k := key
				k.Name = live2.GetName()
				if got, _ := c.Get(k); got.GetResourceVersion() != live2.GetResourceVersion() {
					t.Errorf("%s stored the refused patch", live2.GetName())
				}
			}

			// Add.
			fixture := tt.obj.DeepCopy()
			fixture.SetName(tt.obj.GetName() + "-seeded")
			if fixture.GetNamespace() == "" && fixture.GetKind() == "ConfigMap" {
				fixture.SetNamespace("ns")
			}
			if err := c.Add(fixture); (err != nil) != (tt.want != "") {
				t.Errorf("Add: %v, want an error %v", err, tt.want != "")
			}
		})
	}
}
