package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// This file holds the set writes: marks, creates and updates in place, alone
// or in batches.

// batchable returns how many of actions, from the first, the Step may
// write together: with [Executor.Concurrency] above 1 and no dry run, a
// run of marks, creates or retirements of one kind. A retirement of a
// set without a finalizer is finalized by the Step itself right after
// its delete, so it ends a run (and is never in one).
func (r *run) batchable(actions []Action) int {
	if r.e.Concurrency <= 1 || r.e.DryRun {
		return 0
	}
	ok := func(a Action) bool {
		switch a.Kind {
		case ActionSupersede, ActionRelease, ActionCreate:
			return true
		case ActionRetire:
			s, found := r.set(a.UID)
			return found && !needsFinalizer(*s)
		}
		return false
	}
	n := 0
	for n < len(actions) && actions[n].Kind == actions[0].Kind && ok(actions[n]) {
		n++
	}
	return n
}

// A setWrite is one write of a batch: send makes the call (concurrently
// with the batch's others) and done takes its answer, in plan order.
type setWrite struct {
	send func(ctx context.Context) (*unstructured.Unstructured, error)
	done func(ctx context.Context, live *unstructured.Unstructured, err error) error
}

// batch carries out a run of actions of one kind (see batchable): what
// comes before each write is done in order; the writes then go out at
// most Concurrency at a time; their answers are taken in order. It
// returns every write's error, joined.
func (r *run) batch(ctx context.Context, actions []Action, desired *Desired) error {
	var writes []setWrite
	var prepErr error
	for _, a := range actions {
		var w *setWrite
		var err error
		switch a.Kind {
		case ActionSupersede:
			w, err = r.markWrite(a, desired.Generation)
		case ActionRelease:
			w, err = r.markWrite(a, "")
		case ActionCreate:
			w, err = r.createWrite(ctx, *desired, roleNamed(desired, a.Role))
		case ActionRetire:
			w, err = r.retireWrite(ctx, a.UID)
		}
		if err != nil {
			// As one at a time: nothing after a failure is tried; what
			// was made ready before it is still written.
			prepErr = err
			break
		}
		if w != nil {
			writes = append(writes, *w)
		}
	}
	type answer struct {
		live *unstructured.Unstructured
		err  error
	}
	answers := make([]answer, len(writes))
	sem := make(chan struct{}, r.e.Concurrency)
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			live, err := w.send(ctx)
			answers[i] = answer{live, err}
		}()
	}
	wg.Wait()
	var errs []error
	for i, w := range writes {
		if err := w.done(ctx, answers[i].live, answers[i].err); err != nil {
			errs = append(errs, err)
		}
	}
	if prepErr != nil && !errors.Is(prepErr, errOutOfTime) || len(errs) == 0 {
		errs = append(errs, prepErr)
	}
	// A write that failed is reported even when the Step ran out of time
	// before its next one: a Step out of time returns no error.
	return errors.Join(errs...)
}

func roleNamed(d *Desired, name string) Role {
	for _, r := range d.Roles {
		if r.Name == name {
			return r
		}
	}
	return Role{Name: name}
}

// mark sets (gen non-empty) or removes the superseded annotation. The UID in
// the patch makes it fail rather than touch a re-created set of that name.
func (r *run) mark(ctx context.Context, a Action, gen string) error {
	w, err := r.markWrite(a, gen)
	if err != nil || w == nil {
		return err
	}
	return w.run(ctx)
}

// run sends w and takes its answer.
func (w *setWrite) run(ctx context.Context) error {
	live, err := w.send(ctx)
	return w.done(ctx, live, err)
}

// markWrite is mark's patch, as a write; nil in a dry run.
func (r *run) markWrite(a Action, gen string) (*setWrite, error) {
	var val any
	if gen != "" {
		val = gen
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         a.UID,
		"annotations": map[string]any{r.family.supersededAnnotation(): val},
	}})
	if err != nil {
		return nil, err
	}
	r.record(Call{Verb: "patch", Resource: r.family.Resource.Resource, Name: a.Set})
	if r.e.DryRun {
		if s, ok := r.set(a.UID); ok {
			s.SupersededBy = gen
		}
		return nil, nil
	}
	send := func(ctx context.Context) (*unstructured.Unstructured, error) {
		return r.e.sets().Patch(ctx, a.Set, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	got := false // send read the set again (it runs beside a batch's others)
	if md, s := r.e.setsMetadata(), r.viewed(a.UID); md != nil && s != nil && s.GetGeneration() > 0 {
		// The answer is the set's metadata alone; its content is the one
		// read, unless the server counted a change of it since (a set
		// kind without metadata.generation is patched whole).
		send = func(ctx context.Context) (*unstructured.Unstructured, error) {
			m, err := md.Patch(ctx, a.Set, types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				return nil, err
			}
			if m.Generation == s.GetGeneration() {
				return withMetadata(s, m)
			}
			got = true
			return r.e.sets().Get(ctx, a.Set, metav1.GetOptions{})
		}
	}
	return &setWrite{
		send: send,
		done: func(_ context.Context, live *unstructured.Unstructured, err error) error {
			if got {
				r.setReads.gets++
			}
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return &SetError{Name: a.Set, Err: fmt.Errorf("mark superseded by %q: %w", gen, err)}
			}
			r.saw(live)
			return nil
		},
	}, nil
}

// withMetadata returns obj with the metadata of m and obj's content: what
// a write answered with metadata alone made of a set whose generation
// (the count of its content's changes) is the one read.
func withMetadata(obj *unstructured.Unstructured, m *metav1.PartialObjectMetadata) (*unstructured.Unstructured, error) {
	md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m.ObjectMeta)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	out.Object["metadata"] = md
	return out, nil
}

// build makes the desired set of a role with the family's labels.
func (r *run) build(ctx context.Context, d Desired, role Role) (*unstructured.Unstructured, error) {
	fam := r.family
	name := fam.SetName(d.Generation, role.Name)
	build := d.Build
	if build == nil {
		build = r.e.Build
	}
	if build == nil {
		return nil, &SetError{Name: name, Err: fmt.Errorf("%w: executor has no Build function", ErrInvalidFamily)}
	}
	obj, err := build(ctx, d, role)
	if err != nil {
		return nil, &SetError{Name: name, Err: fmt.Errorf("build role %s of generation %s: %w", role.Name, d.Generation, err)}
	}
	obj = obj.DeepCopy()
	fam.typeMeta(obj)
	obj.SetName(name)
	obj.SetGenerateName("")
	if err := fam.label(obj, d.Generation, role.Name); err != nil {
		return nil, &SetError{Name: name, Err: err}
	}
	if fam.HashAnnotation != "" && role.Hash != "" {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[fam.HashAnnotation] = role.Hash
		obj.SetAnnotations(ann)
	}
	return obj, nil
}

// label gives obj, a set the executor makes, the family's labels, the
// generation label with generation (a generation ID, not
// metadata.generation) and the role label with role. It fails when obj
// carries one of them with another value.
func (f Family) label(obj *unstructured.Unstructured, generation, role string) error {
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	want := maps.Clone(f.Selector)
	want[f.GenerationLabel] = generation
	want[f.roleLabel()] = role
	for k, v := range want {
		if old, ok := lbls[k]; ok && old != v {
			return fmt.Errorf("%w: Build set label %s=%q, the family needs %q", ErrInvalidSet, k, old, v)
		}
		lbls[k] = v
	}
	obj.SetLabels(lbls)
	return nil
}

func (r *run) create(ctx context.Context, d Desired, role Role) error {
	w, err := r.createWrite(ctx, d, role)
	if err != nil || w == nil {
		return err
	}
	return w.run(ctx)
}

// createWrite builds the set of role and returns its create, as a write;
// nil in a dry run.
func (r *run) createWrite(ctx context.Context, d Desired, role Role) (*setWrite, error) {
	obj, err := r.build(ctx, d, role)
	if err != nil {
		return nil, err
	}
	r.record(Call{Verb: "create", Resource: r.family.Resource.Resource, Name: obj.GetName()})
	if r.e.DryRun {
		return nil, nil
	}
	return &setWrite{
		send: func(ctx context.Context) (*unstructured.Unstructured, error) {
			return r.e.sets().Create(ctx, obj, metav1.CreateOptions{})
		},
		done: func(ctx context.Context, made *unstructured.Unstructured, err error) error {
			if !apierrors.IsAlreadyExists(err) {
				if err != nil {
					return &SetError{Name: obj.GetName(), Err: fmt.Errorf("create: %w", err)}
				}
				r.saw(made)
				return nil
			}
			// A retried create after a lost response: adopt the set if it
			// is ours.
			r.setReads.gets++
			live, err := r.e.sets().Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return &SetError{Name: obj.GetName(), Err: fmt.Errorf("get after AlreadyExists: %w", err)}
			}
			s, err := r.family.Observe(live)
			if err != nil || s.Generation != d.Generation || s.Role != role.Name || s.Deleting {
				return &SetError{Name: obj.GetName(), Err: fmt.Errorf("%w: not the live set of %s/%s", ErrNameTaken, d.Generation, role.Name)}
			}
			r.saw(live)
			return nil
		},
	}, nil
}

func (r *run) update(ctx context.Context, d Desired, role Role, cur Set) error {
	want, err := r.build(ctx, d, role)
	if err != nil {
		return err
	}
	sets := r.family.DroppedSets != nil
	if r.e.DryRun {
		// The records of what the update drops are made before it.
		if sets && cur.Object != nil {
			if err := r.recordDroppedSets(ctx, d.Generation, cur.Object, updated(cur.Object, want)); err != nil {
				return &SetError{Name: cur.Name, Err: fmt.Errorf("update in place: %w", err)}
			}
		}
		r.record(Call{Verb: "update", Resource: r.family.Resource.Resource, Name: cur.Name})
		return nil
	}
	first, recorded := true, false
	var done *unstructured.Unstructured
	var left, dropped []Ref // what the record left out, and what it holds
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := cur.Object
		if !first || live == nil {
			var err error
			r.setReads.gets++
			if live, err = r.e.sets().Get(ctx, cur.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		if live.GetUID() != cur.UID {
			return fmt.Errorf("%w: UID is %s, planned for %s", ErrNameTaken, live.GetUID(), cur.UID)
		}
		next := updated(live, want)
		if sets {
			if err := r.recordDroppedSets(ctx, d.Generation, live, next); err != nil {
				return err
			}
		} else {
			var err error
			if dropped, left, err = r.recordDropped(live, next); err != nil {
				return err
			}
		}
		if !recorded {
			r.record(Call{Verb: "update", Resource: r.family.Resource.Resource, Name: cur.Name})
			recorded = true
		}
		var err error
		done, err = r.e.sets().Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return &SetError{Name: cur.Name, Err: fmt.Errorf("update in place: %w", err)}
	}
	r.saw(done)
	if len(left) > 0 {
		return unrecordedError(cur.Name, dropped, left)
	}
	return nil
}

// setContent replaces the content of next, a live set, with that of want,
// the set as built: every top-level field but apiVersion, kind, metadata
// and status. That is spec for a set kind of its own, data for a ConfigMap
// (an inventory set); a content field want lacks is removed.
func setContent(next, want *unstructured.Unstructured) {
	content := func(k string) bool { return k != "apiVersion" && k != "kind" && k != "metadata" && k != "status" }
	for k := range next.Object {
		if _, ok := want.Object[k]; content(k) && !ok {
			delete(next.Object, k)
		}
	}
	for k, v := range want.Object {
		if content(k) {
			next.Object[k] = v
		}
	}
}
