package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// sharedUpgrade seeds n ConfigMaps that static-v1 owns and both static-v1
// and a Ready static-v2 list, so the retirement of static-v1 hands each of
// them over.
func sharedUpgrade(t *testing.T, n int) (*fixture, []handofftest.Key) {
	t.Helper()
	f := newFixture(t)
	var objs []*unstructured.Unstructured
	var keys []handofftest.Key
	owners := map[string]string{}
	for i := range n {
		name := "shared-" + strconv.Itoa(i)
		objs = append(objs, cm(name))
		keys = append(keys, cmKey(name))
		owners[name] = "static-v1"
	}
	f.seed(t, []setSpec{
		{name: "static-v1", gen: "v1", role: "static", age: 20, ready: true, supersededBy: "v2", lists: objs},
		{name: "static-v2", gen: "v2", role: "static", age: 10, ready: true, lists: objs},
	}, objs, owners)
	return f, keys
}

// pagingObjects serves Lists in pages of size, with the index of the next
// item as the continue token, as an API server pages a large collection.
type pagingObjects struct {
	handoff.Objects
	size  int
	pages int
}

func (p *pagingObjects) List(ctx context.Context, gk schema.GroupKind, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	all, err := p.Objects.(handoff.ObjectLister).List(ctx, gk, ns, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	if opts.Limit != 0 && int(opts.Limit) < p.size {
		return nil, fmt.Errorf("limit %d below the page size %d the test serves", opts.Limit, p.size)
	}
	from := 0
	if opts.Continue != "" {
		if from, err = strconv.Atoi(opts.Continue); err != nil {
			return nil, err
		}
	}
	to := min(from+p.size, len(all.Items))
	out := &unstructured.UnstructuredList{Object: all.Object, Items: all.Items[from:to]}
	if to < len(all.Items) {
		out.SetContinue(strconv.Itoa(to))
	}
	p.pages++
	return out, nil
}

// The retirement reads what the set lists with one List per scope, page
// by page, and hands over what it found on every page.
func TestRetireReadsPerScopePaged(t *testing.T) {
	f, keys := sharedUpgrade(t, 7)
	objs := &pagingObjects{Objects: handoff.NewDynamicObjects(f.c.ClientFor("executor"), f.c.Mapper()), size: 3}
	f.exec.Objects = objs
	f.c.ClearActions()
	res, err := f.exec.Step(context.Background(), desired("v2", "static"))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Plan.Of(handoff.ActionRetire)); got != 1 {
		t.Fatalf("%d retirements, want 1:\n%s", got, res.Plan)
	}
	// 7 ConfigMaps in one namespace, 3 a page: 3 pages, no Get.
	if d := cmp.Diff(handoff.Reads{Lists: 3}, res.Reads); d != "" {
		t.Errorf("reads (-want +got):\n%s", d)
	}
	for _, a := range f.c.Actions() {
		if a.Actor == "executor" && a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" {
			t.Errorf("a Get of a listed resource: %v", a)
		}
	}
	for _, k := range keys {
		owners, ok := f.owners(k)
		if !ok || !cmp.Equal(owners, []string{"static-v2"}) {
			t.Errorf("%s: owners %v (exists %v), want static-v2", k.Name, owners, ok)
		}
	}
}

// RBAC that grants get but not list: the scope is read with Gets, the
// Result names it, and the handover is done all the same.
func TestListForbiddenFallsBackToGets(t *testing.T) {
	f, keys := sharedUpgrade(t, 5)
	f.c.InjectFaults(func(c handofftest.Call) handofftest.Fault {
		if c.Verb == "list" && c.Resource.Resource == "configmaps" {
			return handofftest.Fault{Err: apierrors.NewForbidden(c.Resource.GroupResource(), "", errors.New("no list"))}
		}
		return handofftest.Fault{}
	}, "executor")
	res, err := f.exec.Step(context.Background(), desired("v2", "static"))
	if err != nil {
		t.Fatal(err)
	}
	want := handoff.Reads{Lists: 1, Gets: 5, Fallback: []handoff.Scope{{Kind: "ConfigMap", Namespace: testNS}}}
	if d := cmp.Diff(want, res.Reads); d != "" {
		t.Errorf("reads (-want +got):\n%s", d)
	}
	for _, k := range keys {
		if owners, _ := f.owners(k); !cmp.Equal(owners, []string{"static-v2"}) {
			t.Errorf("%s: owners %v, want static-v2", k.Name, owners)
		}
	}
}

// slowObjects makes every ownership write take a while, as a client under
// a rate limiter does, and counts the writes per object.
type slowObjects struct {
	handoff.Objects
	delay  time.Duration
	mu     sync.Mutex
	writes map[types.UID]int
	starts []time.Time // when each write began
}

func (s *slowObjects) SetOwnerReferences(ctx context.Context, live *unstructured.Unstructured, refs []metav1.OwnerReference) error {
	s.mu.Lock()
	s.starts = append(s.starts, time.Now())
	s.mu.Unlock()
	time.Sleep(s.delay)
	s.mu.Lock()
	s.writes[live.GetUID()]++
	s.mu.Unlock()
	return s.Objects.SetOwnerReferences(ctx, live, refs)
}

func (s *slowObjects) List(ctx context.Context, gk schema.GroupKind, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return s.Objects.(handoff.ObjectLister).List(ctx, gk, ns, opts)
}

// A Step that runs out of its StepTimeout stops between two calls, says
// so, and returns no error; the next Steps go on from there: every
// handover is written once, none is lost, and the old set goes only when
// all are done.
func TestStepTimeoutKeepsProgress(t *testing.T) {
	const n = 12
	f, keys := sharedUpgrade(t, n)
	slow := &slowObjects{Objects: handoff.NewDynamicObjects(f.c.ClientFor("executor"), f.c.Mapper()), delay: 10 * time.Millisecond, writes: map[types.UID]int{}}
	f.exec.Objects = slow
	f.exec.StepTimeout = 35 * time.Millisecond
	v1 := handofftest.Key{Group: handofftest.SetResource.Group, Kind: setKind, Name: "static-v1"}
	interrupted := 0
	for i := 0; ; i++ {
		if i == 3*n {
			t.Fatalf("not settled after %d Steps", i)
		}
		start, before := time.Now(), len(slow.starts)
		res, err := f.exec.Step(context.Background(), desired("v2", "static"))
		if err != nil {
			t.Fatalf("Step %d: %v", i, err)
		}
		// The Step stops before its next call once time has run out: no
		// write begins after the deadline but, at most, the one whose
		// check came just before it. (Counted, not timed: a loaded
		// machine may stretch any call.)
		late := 0
		for _, at := range slow.starts[before:] {
			if at.After(start.Add(f.exec.StepTimeout)) {
				late++
			}
		}
		if late > 1 {
			t.Errorf("Step %d began %d writes after its StepTimeout of %v ran out", i, late, f.exec.StepTimeout)
		}
		if res.Interrupted {
			interrupted++
			if !res.Requeue {
				t.Errorf("Step %d interrupted without Requeue", i)
			}
			if o, ok := f.c.Get(v1); !ok || o.GetDeletionTimestamp() != nil {
				t.Fatalf("Step %d: static-v1 retired before every handover was done", i)
			}
		}
		if !res.Requeue {
			break
		}
	}
	if interrupted == 0 {
		t.Fatal("no Step ran out of time: the test shows nothing")
	}
	for _, k := range keys {
		live, ok := f.c.Get(k)
		if !ok {
			t.Fatalf("%s was deleted", k.Name)
		}
		if w := slow.writes[live.GetUID()]; w != 1 {
			t.Errorf("%s handed over %d times, want once", k.Name, w)
		}
		if owners, _ := f.owners(k); !cmp.Equal(owners, []string{"static-v2"}) {
			t.Errorf("%s: owners %v, want static-v2", k.Name, owners)
		}
	}
	t.Logf("%d handovers over %d interrupted Steps", n, interrupted)
}
