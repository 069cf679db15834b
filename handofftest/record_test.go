package handofftest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

func at(seconds int) time.Time { return t0.Add(time.Duration(seconds) * time.Second) }

func TestTimeline(t *testing.T) {
	c := newCluster(t)
	cms := c.Dynamic().Resource(cmGVR).Namespace("ns")
	sets := c.Dynamic().Resource(setGVR)
	first := create(t, cms, configMap("ns", "a"))                                         // t1
	if err := cms.Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil { // t2
		t.Fatal(err)
	}
	second := create(t, cms, configMap("ns", "a"))                                           // t3
	set := create(t, sets, installerSet("set", "keep"))                                      // t4
	if err := sets.Delete(context.Background(), "set", metav1.DeleteOptions{}); err != nil { // t5
		t.Fatal(err)
	}
	if _, err := sets.Patch(context.Background(), "set", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil { // t6
		t.Fatal(err)
	}

	tests := map[string]struct {
		key  Key
		want []Interval
	}{
		"a re-created object has two lifetimes": {
			key: cmKey("a"),
			want: []Interval{
				{UID: first.GetUID(), From: at(1), To: at(2)},
				{UID: second.GetUID(), From: at(3)},
			},
		},
		"a finalized object was deleting before it was removed": {
			key:  setKey("set"),
			want: []Interval{{UID: set.GetUID(), From: at(4), Deleting: at(5), To: at(6)}},
		},
		"an object that never existed": {key: cmKey("never")},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, c.Timeline(tt.key)); diff != "" {
				t.Errorf("timeline (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]Key{cmKey("a"), setKey("set")}, c.Keys()); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
	if !c.Exists(cmKey("a")) || c.Exists(setKey("set")) {
		t.Error("Exists disagrees with the timelines")
	}
}

func TestIntervalContains(t *testing.T) {
	tests := map[string]struct {
		iv   Interval
		at   time.Time
		want bool
	}{
		"at the start":              {Interval{From: at(1), To: at(3)}, at(1), true},
		"inside":                    {Interval{From: at(1), To: at(3)}, at(2), true},
		"at the end":                {Interval{From: at(1), To: at(3)}, at(3), false},
		"before":                    {Interval{From: at(1), To: at(3)}, at(0), false},
		"after the start, still on": {Interval{From: at(1)}, at(100), true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tt.iv.Contains(tt.at); got != tt.want {
				t.Errorf("Contains = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWrites(t *testing.T) {
	c := newCluster(t)
	exec := c.ClientFor("executor")
	ctrl := c.ClientFor("controller")
	set := create(t, exec.Resource(setGVR), installerSet("set"))
	create(t, ctrl.Resource(cmGVR).Namespace("ns"), ownedBy(configMap("ns", "cm"), set))
	if _, err := ctrl.Resource(setGVR).UpdateStatus(context.Background(), withPhase(set, "ready"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An identical update is not a write.
	cm, _ := c.Get(cmKey("cm"))
	if _, err := ctrl.Resource(cmGVR).Namespace("ns").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := exec.Resource(setGVR).Delete(context.Background(), "set", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, w := range c.Writes() {
		got = append(got, fmt.Sprintf("%s %s %s %s %s", w.Time.Format("05"), w.Actor, w.Verb, w.Key.Name, w.Effect))
	}
	want := []string{
		"01 executor create set created",
		"02 controller create cm created",
		"03 controller update set updated",
		"05 executor delete set removed",
		"05 garbage-collector delete cm removed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	writes := c.Writes()
	prev := 0
	for _, w := range writes {
		rv, err := strconv.Atoi(w.ResourceVersion)
		if err != nil || rv <= prev {
			t.Errorf("write %s: resourceVersion %q does not increase", w, w.ResourceVersion)
		}
		prev = rv
	}
	if w := writes[2]; w.Subresource != "status" || w.Object.Object["status"] == nil {
		t.Errorf("status write = %+v, want subresource status and the new object", w)
	}
	if got, want := writes[0].String(), "2025-01-01T00:00:01Z executor create operator.tekton.dev/TektonInstallerSet set: created rv=1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// WritesSince gives the tail of Writes.
	for n := 0; n <= len(writes)+1; n++ {
		var want []string
		if n < len(writes) {
			for _, w := range writes[n:] {
				want = append(want, w.String())
			}
		}
		var got []string
		for _, w := range c.WritesSince(n) {
			got = append(got, w.String())
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("WritesSince(%d) (-Writes()[n:] +got):\n%s", n, d)
		}
	}
}

func TestCallsAndActions(t *testing.T) {
	c := newCluster(t)
	exec := c.ClientFor("executor")
	create(t, exec.Resource(setGVR), installerSet("a"))
	create(t, exec.Resource(setGVR), installerSet("b"))
	_, err := exec.Resource(setGVR).Get(context.Background(), "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get: %v", err)
	}
	if _, err := c.ClientFor("controller").Resource(setGVR).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Dynamic().Resource(setGVR).Get(context.Background(), "a", metav1.GetOptions{})

	want := map[CallKey]int{
		{Actor: "executor", Verb: "create"}: 2,
		{Actor: "executor", Verb: "get"}:    1,
		{Actor: "controller", Verb: "list"}: 1,
		{Actor: "", Verb: "get"}:            1,
	}
	if diff := cmp.Diff(want, c.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	actions := c.Actions()
	if len(actions) != 5 {
		t.Fatalf("%d actions, want 5", len(actions))
	}
	if a := actions[0]; !a.Matches("create", "tektoninstallersets") || a.Actor != "executor" || a.Err != nil || !a.Time.Equal(at(1)) {
		t.Errorf("first action = %+v", a)
	}
	if a := actions[2]; !a.Matches("get", "tektoninstallersets") || !apierrors.IsNotFound(a.Err) || a.Injected {
		t.Errorf("third action = %+v, want a get that failed with NotFound", a)
	}
	if a := actions[3]; a.Actor != "controller" || a.GetVerb() != "list" {
		t.Errorf("fourth action = %+v", a)
	}
	c.ClearActions()
	if len(c.Actions()) != 0 || len(c.Calls()) != 0 {
		t.Error("ClearActions left actions or calls")
	}
	if len(c.Writes()) != 2 {
		t.Errorf("ClearActions dropped writes: %v", c.Writes())
	}
}

// Every action names the object it was about, creates and updates
// included, whose client-go form does not; a create from generateName is
// named by the name the server gave, even when the response was lost.
func TestActionNames(t *testing.T) {
	generated := func() *unstructured.Unstructured {
		u := installerSet("")
		u.SetGenerateName("pipeline-main-static-")
		return u
	}
	withA := func(t *testing.T, sets dynamic.ResourceInterface) { create(t, sets, installerSet("a")) }
	for name, tt := range map[string]struct {
		setup func(t *testing.T, sets dynamic.ResourceInterface)
		fault Fault
		// call makes the call whose action is checked first, and returns
		// the name that action must have.
		call func(t *testing.T, sets dynamic.ResourceInterface) string
	}{
		"a create by name": {call: func(t *testing.T, sets dynamic.ResourceInterface) string {
			return create(t, sets, installerSet("a")).GetName()
		}},
		"a create from generateName": {call: func(t *testing.T, sets dynamic.ResourceInterface) string {
			return create(t, sets, generated()).GetName()
		}},
		"a create from generateName whose response was lost": {
			fault: Fault{Mode: AfterCommit, Err: apierrors.NewTimeoutError("lost", 0)},
			call: func(t *testing.T, sets dynamic.ResourceInterface) string {
				if _, err := sets.Create(context.Background(), generated(), metav1.CreateOptions{}); err == nil {
					t.Fatal("create: no error, want the injected one")
				}
				l, err := sets.List(context.Background(), metav1.ListOptions{})
				if err != nil || len(l.Items) != 1 {
					t.Fatalf("list: %v, %v; want the one set created", l, err)
				}
				return l.Items[0].GetName()
			},
		},
		"a create from generateName that failed before commit": {
			fault: Fault{Mode: BeforeCommit, Err: apierrors.NewInternalError(errors.New("down"))},
			call: func(t *testing.T, sets dynamic.ResourceInterface) string {
				if _, err := sets.Create(context.Background(), generated(), metav1.CreateOptions{}); err == nil {
					t.Fatal("create: no error, want the injected one")
				}
				return ""
			},
		},
		"an update": {setup: withA, call: func(t *testing.T, sets dynamic.ResourceInterface) string {
			u := installerSet("a")
			u.SetLabels(map[string]string{"x": "y"})
			if _, err := sets.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			return "a"
		}},
		"a status update": {setup: withA, call: func(t *testing.T, sets dynamic.ResourceInterface) string {
			u := installerSet("a")
			u.Object["status"] = map[string]any{"phase": "x"}
			if _, err := sets.UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			return "a"
		}},
		"a patch": {setup: withA, call: func(t *testing.T, sets dynamic.ResourceInterface) string {
			if _, err := sets.Patch(context.Background(), "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			return "a"
		}},
		"a delete": {setup: withA, call: func(t *testing.T, sets dynamic.ResourceInterface) string {
			if err := sets.Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return "a"
		}},
		"a list": {setup: withA, call: func(t *testing.T, sets dynamic.ResourceInterface) string {
			if _, err := sets.List(context.Background(), metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			return ""
		}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			sets := c.ClientFor("test").Resource(setGVR)
			if tt.setup != nil {
				tt.setup(t, sets)
			}
			c.ClearActions()
			c.InjectFaults(FailNth(1, tt.fault.Mode, tt.fault.Err), "test")
			if tt.fault.Err == nil {
				c.DisableFaults()
			}
			want := tt.call(t, sets)
			actions := c.Actions()
			if len(actions) == 0 {
				t.Fatal("no action recorded")
			}
			if got := actions[0].Name; got != want {
				t.Errorf("action %s: Name %q, want %q", actions[0].GetVerb(), got, want)
			}
		})
	}
}
