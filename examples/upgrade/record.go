package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kube-handoff/handoff/handofftest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// recorder records, from watches, every absence of the shared resources.
type recorder struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	keys   []handofftest.Key
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	absent map[handofftest.Key]time.Time
	gaps   []handofftest.Gap
	errs   []error
}

// record checks that every key exists and opens one watch per resource
// and namespace, from the resourceVersion of that check's list, so that no
// deletion between the check and the end of the upgrade goes unseen.
func record(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, keys []handofftest.Key) (*recorder, error) {
	wctx, cancel := context.WithCancel(ctx)
	rec := &recorder{dyn: dyn, mapper: mapper, keys: keys, cancel: cancel, absent: map[handofftest.Key]time.Time{}}
	type scope struct {
		gvr schema.GroupVersionResource
		ns  string
	}
	groups := map[scope]map[handofftest.Key]bool{}
	for _, k := range keys {
		m, err := mapping(mapper, schema.GroupKind{Group: k.Group, Kind: k.Kind})
		if err != nil {
			cancel()
			return nil, err
		}
		sc := scope{gvr: m.Resource, ns: k.Namespace}
		if groups[sc] == nil {
			groups[sc] = map[handofftest.Key]bool{}
		}
		groups[sc][k] = true
	}
	for sc, want := range groups {
		var ri dynamic.ResourceInterface = dyn.Resource(sc.gvr)
		if sc.ns != "" {
			ri = dyn.Resource(sc.gvr).Namespace(sc.ns)
		}
		list, err := ri.List(wctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("list %s: %w", sc.gvr.Resource, err)
		}
		seen := map[handofftest.Key]bool{}
		for i := range list.Items {
			seen[handofftest.KeyOf(&list.Items[i])] = true
		}
		for k := range want {
			if !seen[k] {
				cancel()
				return nil, fmt.Errorf("%s is absent before the upgrade", k)
			}
		}
		wi, err := ri.Watch(wctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("watch %s: %w", sc.gvr.Resource, err)
		}
		rec.wg.Add(1)
		go rec.consume(wctx, sc.gvr.Resource, wi, want)
	}
	return rec, nil
}

func (r *recorder) consume(ctx context.Context, what string, wi watch.Interface, want map[handofftest.Key]bool) {
	defer r.wg.Done()
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("watch of %s ended before the upgrade did: the record is incomplete", what))
				}
				return
			}
			r.event(what, ev, want)
		}
	}
}

func (r *recorder) event(what string, ev watch.Event, want map[handofftest.Key]bool) {
	if ev.Type == watch.Error {
		r.fail(fmt.Errorf("watch of %s: %w", what, apierrors.FromObject(ev.Object)))
		return
	}
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return
	}
	k := handofftest.KeyOf(u)
	if !want[k] {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	from, gone := r.absent[k]
	switch {
	case ev.Type == watch.Deleted && !gone:
		r.absent[k] = now
	case ev.Type != watch.Deleted && gone:
		r.gaps = append(r.gaps, handofftest.Gap{Key: k, From: from, To: now})
		delete(r.absent, k)
	}
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// stop ends the watches and returns the absences: closed ones, ones still
// open, and any key found missing by a final Get that no watch reported.
func (r *recorder) stop(ctx context.Context) ([]handofftest.Gap, error) {
	r.cancel()
	r.wg.Wait()
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, from := range r.absent {
		r.gaps = append(r.gaps, handofftest.Gap{Key: k, From: from, To: now})
	}
	for _, k := range r.keys {
		if _, open := r.absent[k]; open {
			continue
		}
		ri, err := resource(r.dyn, r.mapper, k)
		if err != nil {
			r.errs = append(r.errs, err)
			continue
		}
		if _, err := ri.Get(ctx, k.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			r.gaps = append(r.gaps, handofftest.Gap{Key: k, From: now, To: now})
		} else if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	slices.SortFunc(r.gaps, func(a, b handofftest.Gap) int { return a.From.Compare(b.From) })
	return r.gaps, errors.Join(r.errs...)
}
