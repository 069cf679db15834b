package handoff

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corefake "k8s.io/client-go/kubernetes/typed/core/v1/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The typed ConfigMap client of client-go's fake core group stands in for
// a client-gen client of a set kind: same generator, same signatures. (The
// core group alone: the whole fake clientset would compile every API group
// into this package's tests.)
var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func typedConfigMaps(objs ...*corev1.ConfigMap) (SetClient, corev1client.CoreV1Interface) {
	tracker := k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	fake := &k8stesting.Fake{}
	fake.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	n := 0
	fake.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// The fake keeps no UIDs; the API server gives one on create.
		obj := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap)
		if obj.UID == "" {
			n++
			obj.UID = types.UID(fmt.Sprintf("uid-%d", n))
		}
		return false, nil, nil
	})
	for _, o := range objs {
		_ = tracker.Add(o)
	}
	core := &corefake.FakeCoreV1{Fake: fake}
	return NewTypedSetClient[corev1.ConfigMap](core.ConfigMaps("ns"), configMapGVK), core
}

func configMap(name string, lbls map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: lbls, UID: types.UID("uid-" + name)},
		Data: map[string]string{"k": name}}
}

func TestTypedSetClient(t *testing.T) {
	ctx := context.Background()
	a := configMap("a", map[string]string{"family": "x"})
	b := configMap("b", map[string]string{"family": "y"})

	t.Run("List honours the selector and fills apiVersion and kind", func(t *testing.T) {
		c, _ := typedConfigMaps(a, b)
		list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "family=x"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range list.Items {
			got = append(got, u.GetAPIVersion()+" "+u.GetKind()+" "+u.GetName()+" "+string(u.GetUID()))
		}
		if d := cmp.Diff([]string{"v1 ConfigMap a uid-a"}, got); d != "" {
			t.Errorf("items (-want +got):\n%s", d)
		}
	})

	t.Run("Get fills apiVersion and kind and passes NotFound through", func(t *testing.T) {
		c, _ := typedConfigMaps(a)
		u, err := c.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(configMapGVK, u.GroupVersionKind()); d != "" {
			t.Errorf("GVK (-want +got):\n%s", d)
		}
		if _, err := c.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("got %v, want NotFound", err)
		}
	})

	t.Run("Create keeps the name and content; a second create is AlreadyExists", func(t *testing.T) {
		c, cs := typedConfigMaps()
		u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"k": "v"}}}
		u.SetName("made")
		u.SetNamespace("ns")
		u.SetLabels(map[string]string{"family": "x"})
		made, err := c.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff("made ConfigMap", made.GetName()+" "+made.GetKind()); d != "" {
			t.Errorf("created (-want +got):\n%s", d)
		}
		live, err := cs.ConfigMaps("ns").Get(ctx, "made", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(map[string]string{"k": "v"}, live.Data); d != "" {
			t.Errorf("stored data (-want +got):\n%s", d)
		}
		if _, err := c.Create(ctx, u, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("got %v, want AlreadyExists", err)
		}
	})

	t.Run("Update writes the converted object", func(t *testing.T) {
		c, cs := typedConfigMaps(a)
		u, err := c.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(u.Object, "changed", "data", "k")
		if _, err := c.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		live, _ := cs.ConfigMaps("ns").Get(ctx, "a", metav1.GetOptions{})
		if d := cmp.Diff("changed", live.Data["k"]); d != "" {
			t.Errorf("data (-want +got):\n%s", d)
		}
	})

	t.Run("Patch passes a merge patch through", func(t *testing.T) {
		c, _ := typedConfigMaps(a)
		got, err := c.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"annotations":{"m":"1"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(map[string]string{"m": "1"}, got.GetAnnotations()); d != "" {
			t.Errorf("annotations (-want +got):\n%s", d)
		}
	})

	t.Run("Delete deletes; subresources are refused", func(t *testing.T) {
		c, cs := typedConfigMaps(a)
		if err := c.Delete(ctx, "a", metav1.DeleteOptions{}, "status"); err == nil {
			t.Error("Delete with a subresource: want an error")
		}
		if err := c.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.ConfigMaps("ns").Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("got %v, want NotFound", err)
		}
	})
}

// alwaysReady stands in for a set controller's Ready condition.
type alwaysReady struct{}

func (alwaysReady) Ready(*unstructured.Unstructured) Readiness { return Readiness{State: Ready} }

// TestExecutorStepOverTypedClient upgrades a family through the typed
// adapter alone: the executor's creates, marks and retirements all go
// through a client-gen client.
func TestExecutorStepOverTypedClient(t *testing.T) {
	ctx := context.Background()
	c, cs := typedConfigMaps()
	e := &Executor{
		Family: Family{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap",
			Selector: map[string]string{"family": "x"}, GenerationLabel: "gen", NamePrefix: "x-",
			Resources: func(*unstructured.Unstructured) ([]Ref, error) { return nil, nil }, Probe: alwaysReady{}},
		Sets: c,
		// The sets list nothing, so no retirement reaches a resource.
		Objects: NewDynamicObjects(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), meta.NewDefaultRESTMapper(nil)),
		Build: func(_ context.Context, d Desired, r Role) (*unstructured.Unstructured, error) {
			u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"gen": d.Generation}}}
			u.SetNamespace("ns")
			return u, nil
		},
	}
	for _, gen := range []string{"v1", "v1", "v2", "v2"} {
		if _, err := e.Step(ctx, &Desired{Generation: gen, Roles: []Role{{Name: "main"}}}); err != nil {
			t.Fatalf("step to %s: %v", gen, err)
		}
	}
	list, err := cs.ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list.Items {
		got = append(got, s.Name+" "+s.Labels["gen"]+" "+s.Data["gen"])
	}
	if d := cmp.Diff([]string{e.Family.SetName("v2", "main") + " v2 v2"}, got); d != "" {
		t.Errorf("sets after the upgrade (-want +got):\n%s", d)
	}
}
