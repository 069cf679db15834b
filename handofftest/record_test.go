package handofftest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func at(seconds int) time.Time { return t0.Add(time.Duration(seconds) * time.Second) }

func TestTimeline(t *testing.T) {
	c := newCluster(t)
	cms := c.Dynamic().Resource(cmGVR).Namespace("ns")
	sets := c.Dynamic().Resource(setGVR)
	first := create(t, cms, configMap("ns", "a"))                                // t1
	if err := cms.Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil { // t2
		t.Fatal(err)
	}
	second := create(t, cms, configMap("ns", "a"))                                  // t3
	set := create(t, sets, installerSet("set", "keep"))                             // t4
	if err := sets.Delete(t.Context(), "set", metav1.DeleteOptions{}); err != nil { // t5
		t.Fatal(err)
	}
	if _, err := sets.Patch(t.Context(), "set", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil { // t6
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
	if _, err := ctrl.Resource(setGVR).UpdateStatus(t.Context(), withPhase(set, "ready"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An identical update is not a write.
	cm, _ := c.Get(cmKey("cm"))
	if _, err := ctrl.Resource(cmGVR).Namespace("ns").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := exec.Resource(setGVR).Delete(t.Context(), "set", metav1.DeleteOptions{}); err != nil {
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
}

func TestCallsAndActions(t *testing.T) {
	c := newCluster(t)
	exec := c.ClientFor("executor")
	create(t, exec.Resource(setGVR), installerSet("a"))
	create(t, exec.Resource(setGVR), installerSet("b"))
	_, err := exec.Resource(setGVR).Get(t.Context(), "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get: %v", err)
	}
	if _, err := c.ClientFor("controller").Resource(setGVR).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Dynamic().Resource(setGVR).Get(t.Context(), "a", metav1.GetOptions{})

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
