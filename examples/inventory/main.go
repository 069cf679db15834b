// Command inventory runs an operator without a set kind through a whole
// life, with package inventory: the widget operator (operator.go)
// installs release v1 of its component for a Widget, upgrades it in place
// to v2, and removes it when the Widget is deleted.
//
//	go run ./examples/inventory
//
// It runs on the fake cluster of package handofftest, which refuses
// objects in namespaces that do not exist (handofftest.RequireNamespaces)
// and whose workloads roll out when handofftest.Rollouts, playing the
// deployment controller, takes a pass after each reconcile (two passes a
// rollout: one under way, one done). It prints what happened, read from
// the cluster's record of writes and lifetimes: what was applied, when the
// Secret only v1 has was deleted relative to v2's rollout, whether any
// object both releases list was ever absent, and what the removal left.
//
// The operator's code that touches the library is in reconcile: an
// Inventory, its Executor, a Generation, a Record before the apply and a
// Step after it in each reconcile, and Step(ctx, nil) on removal.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	mf "github.com/manifestival/manifestival"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

const (
	// widgetNS holds the Widget and the namespaced objects of its release.
	widgetNS   = "widgets"
	widgetName = "demo"
	// operatorActor is the operator's client on the fake cluster.
	operatorActor = "widget-operator"
)

// world is the widget operator on a fake cluster, with the controllers
// that roll out what it applies.
type world struct {
	c        *handofftest.Cluster
	op       *operator
	rollouts *handofftest.Rollouts
	// rounds bounds each settle.
	rounds int
}

func newWorld() *world {
	// The operator's namespace and the Widget's exist; any other would
	// have to be created first, as on a real cluster.
	c := handofftest.NewCluster(handofftest.RequireNamespaces(operatorNS, widgetNS))
	c.Register(widgets, "Widget", true)
	dyn := c.ClientFor(operatorActor)
	return &world{
		c:        c,
		op:       &operator{dyn: dyn, mapper: c.Mapper(), apply: handofftest.ManifestivalClient(dyn, c.Mapper())},
		rollouts: &handofftest.Rollouts{Passes: 2},
		rounds:   10,
	}
}

// settle reconciles the Widget until the operator no longer asks to
// requeue, the controllers taking a pass after each reconcile. A reconcile
// that fails is retried, as a controller's work queue does.
func (w *world) settle(ctx context.Context) (reconciles int, err error) {
	var last error
	for i := 1; i <= w.rounds; i++ {
		requeue, err := w.op.reconcile(ctx, widgetNS, widgetName)
		if _, rerr := w.rollouts.RollOut(ctx, w.c); rerr != nil {
			return i, rerr
		}
		if err == nil && !requeue {
			return i, nil
		}
		last = err
	}
	return w.rounds, fmt.Errorf("not settled after %d reconciles: %v", w.rounds, last)
}

// user is the client of the Widget's owner.
func (w *world) user() dynamic.ResourceInterface {
	return w.c.ClientFor("user").Resource(widgets).Namespace(widgetNS)
}

// chapter is one part of the story: the reconciles it took and the writes
// it made.
type chapter struct {
	title      string
	reconciles int
	from, to   time.Time
	// before holds the objects as they were when the chapter began.
	before map[handofftest.Key]*unstructured.Unstructured
	writes []handofftest.Write
}

// story is what the run did, read from the cluster.
type story struct {
	chapters []chapter
	// shared are the objects both releases list; gaps their absences
	// during the upgrade.
	shared []handofftest.Key
	gaps   []handofftest.Gap
	// rolledOut is when v2's Deployment was first rolled out at v2's
	// spec; secretGone when the Secret only v1 has was removed.
	rolledOut, secretGone time.Time
	// left is what the removal left; widgetGone whether the Widget is.
	left       []*unstructured.Unstructured
	widgetGone bool
}

var (
	deploymentKey = handofftest.Key{Group: "apps", Kind: "Deployment", Namespace: widgetNS, Name: "widget-webhook"}
	secretKey     = handofftest.Key{Kind: "Secret", Namespace: widgetNS, Name: "widget-legacy-certs"}
	widgetKey     = handofftest.Key{Group: widgets.Group, Kind: "Widget", Namespace: widgetNS, Name: widgetName}
)

// run is the whole life: install v1, upgrade to v2, removal.
func (w *world) run(ctx context.Context) (*story, error) {
	s := &story{}
	chapterOf := func(title string, act func() error) error {
		n, from := len(w.c.Writes()), w.c.Now()
		before := map[handofftest.Key]*unstructured.Unstructured{}
		for _, o := range w.c.Objects() {
			before[handofftest.KeyOf(o)] = o
		}
		if err := act(); err != nil {
			return fmt.Errorf("%s: %w", title, err)
		}
		k, err := w.settle(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", title, err)
		}
		s.chapters = append(s.chapters, chapter{title: title, reconciles: k, from: from, to: w.c.Now(), before: before, writes: w.c.WritesSince(n)})
		return nil
	}
	widget := handofftest.Object(widgets.GroupVersion().String(), "Widget", widgetNS, widgetName, nil,
		map[string]any{"spec": map[string]any{"version": "v1"}})
	if err := chapterOf("install v1", func() error {
		_, err := w.user().Create(ctx, widget, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if err := chapterOf("upgrade to v2", func() error {
		_, err := w.user().Patch(ctx, widgetName, types.MergePatchType, []byte(`{"spec":{"version":"v2"}}`), metav1.PatchOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if err := chapterOf("removal", func() error {
		return w.user().Delete(ctx, widgetName, metav1.DeleteOptions{})
	}); err != nil {
		return nil, err
	}

	// I1 over the upgrade: what both releases list is never absent.
	v1, err := w.op.load("v1", widgetNS)
	if err != nil {
		return nil, err
	}
	v2, err := w.op.load("v2", widgetNS)
	if err != nil {
		return nil, err
	}
	s.shared = sharedKeys(v1, v2)
	up := s.chapters[1]
	s.gaps = w.c.Gaps(s.shared, up.from, up.to)
	for _, wr := range up.writes {
		if wr.Key == deploymentKey && s.rolledOut.IsZero() && image(wr.Object) == "example.dev/widget-webhook:v2" &&
			handoff.Rollout(wr.Object).State == handoff.Ready {
			s.rolledOut = wr.Time
		}
	}
	if tl := w.c.Timeline(secretKey); len(tl) > 0 {
		s.secretGone = tl[len(tl)-1].To
	}
	s.left = w.c.Objects()
	s.widgetGone = !w.c.Exists(widgetKey)
	return s, nil
}

// sharedKeys returns the objects both manifests list.
func sharedKeys(a, b mf.Manifest) []handofftest.Key {
	in := map[handofftest.Key]bool{}
	for _, u := range a.Resources() {
		in[handofftest.KeyOf(&u)] = true
	}
	var out []handofftest.Key
	for _, u := range b.Resources() {
		if k := handofftest.KeyOf(&u); in[k] {
			out = append(out, k)
		}
	}
	return out
}

// image is the first container image of a Deployment.
func image(d *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return ""
	}
	img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image")
	return img
}

// print writes the transcript.
func (s *story) print(out io.Writer) {
	for _, ch := range s.chapters {
		fmt.Fprintf(out, "== %s: %d reconciles\n", ch.title, ch.reconciles)
		for _, line := range events(ch.before, ch.writes) {
			fmt.Fprintln(out, "  ", line)
		}
	}
	fmt.Fprintln(out, "== what the cluster's record says")
	fmt.Fprintf(out, "   objects both releases list: %d; absent at any instant of the upgrade: %d\n", len(s.shared), len(s.gaps))
	for _, g := range s.gaps {
		fmt.Fprintln(out, "     ", g)
	}
	if !s.rolledOut.IsZero() && !s.secretGone.IsZero() {
		fmt.Fprintf(out, "   %s deleted at %s, %s after v2 rolled out (%s)\n",
			secretKey, clock(s.secretGone), s.secretGone.Sub(s.rolledOut), clock(s.rolledOut))
	}
	var left []string
	for _, o := range s.left {
		what := handofftest.KeyOf(o).String()
		if len(o.GetOwnerReferences()) == 0 {
			what += " (no owner)"
		}
		left = append(left, what)
	}
	fmt.Fprintf(out, "   left after the removal: %s\n", strings.Join(left, ", "))
	fmt.Fprintf(out, "   Widget %s/%s gone: %v\n", widgetNS, widgetName, s.widgetGone)
}

func clock(t time.Time) string { return t.Format(time.TimeOnly) }

// events tells what writes did, a line per run of writes of one kind by
// one actor: creates, applies, rollouts, deletes. It leaves out the
// operator's finalizer writes, the writes of a rollout under way and the
// library's bookkeeping on inventories. before holds the objects as they
// were before the first write.
func events(before map[handofftest.Key]*unstructured.Unstructured, writes []handofftest.Write) []string {
	var lines, items []string
	var last string
	var at time.Time
	flush := func() {
		switch {
		case last == "":
		case len(items) == 0:
			lines = append(lines, clock(at)+" "+last)
		default:
			lines = append(lines, fmt.Sprintf("%s %s: %s", clock(at), last, strings.Join(items, ", ")))
		}
		last, items = "", nil
	}
	prev := map[handofftest.Key]*unstructured.Unstructured{}
	for k, o := range before {
		prev[k] = o
	}
	for _, wr := range writes {
		what, item := describe(wr, prev[wr.Key])
		prev[wr.Key] = wr.Object
		if what == "" {
			continue
		}
		if what != last {
			flush()
			last, at = what, wr.Time
		}
		if item != "" {
			items = append(items, item)
		}
	}
	flush()
	return lines
}

// describe says what one write did, and to which object ("" for the
// Widget, which the first says), or "" to leave it out.
func describe(wr handofftest.Write, before *unstructured.Unstructured) (what, object string) {
	object = wr.Key.Kind + " " + wr.Key.Name
	inventory := wr.Key.Kind == "ConfigMap" && wr.Key.Namespace == operatorNS
	generation := wr.Object.GetLabels()["handoff.kube-handoff.io/generation"]
	switch {
	case wr.Subresource == "status":
		if handoff.Rollout(wr.Object).State == handoff.Ready {
			return wr.Actor + " rolled out", object
		}
		return "", ""
	case wr.Key == widgetKey:
		widget := fmt.Sprintf("Widget %s/%s", widgetNS, widgetName)
		switch {
		case wr.Actor != "user" && wr.Effect != handofftest.Removed:
			return "", "" // the operator's finalizer
		case wr.Effect == handofftest.Created:
			return "user created " + widget + ", version " + version(wr.Object), ""
		case wr.Effect == handofftest.Deleting:
			return "user deleted " + widget + ", held by its finalizer", ""
		case wr.Effect == handofftest.Removed:
			return widget + " gone, its finalizer dropped by " + wr.Actor, ""
		}
		return "user set " + widget + " to version " + version(wr.Object), ""
	case inventory && wr.Effect == handofftest.Created:
		return wr.Actor + " recorded the inventory of " + generation, wr.Key.Name
	case inventory && wr.Effect == handofftest.Removed:
		return wr.Actor + " deleted the inventory of " + generation, wr.Key.Name
	case inventory:
		return "", ""
	case wr.Effect == handofftest.Created:
		return wr.Actor + " created", object
	case wr.Effect == handofftest.Removed, wr.Effect == handofftest.Deleting:
		return wr.Actor + " deleted", object
	case before != nil && len(wr.Object.GetOwnerReferences()) < len(before.GetOwnerReferences()):
		return wr.Actor + " released from the Widget (protected, it stays)", object
	}
	return wr.Actor + " applied", object
}

func version(widget *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(widget.Object, "spec", "version")
	return v
}

func main() {
	w := newWorld()
	s, err := w.run(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "inventory:", err)
		os.Exit(1)
	}
	s.print(os.Stdout)
	if len(s.gaps) > 0 || s.rolledOut.IsZero() || !s.secretGone.After(s.rolledOut) || !s.widgetGone {
		os.Exit(1)
	}
}
