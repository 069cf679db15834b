package example_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handoffctrl"
	"github.com/kube-handoff/handoff/handoffctrl/example"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	widgetNS   = "widgets"
	widgetName = "demo"
	// operatorActor is the operator's identity on the fake cluster: the
	// manager's and the executor's requests alike.
	operatorActor = "widget-operator"
	// settleTimeout bounds each wait for the operator to settle.
	settleTimeout = 30 * time.Second
)

var (
	configKey     = handofftest.Key{Kind: "ConfigMap", Namespace: widgetNS, Name: "widget-config"}
	serviceKey    = handofftest.Key{Kind: "Service", Namespace: widgetNS, Name: "widget-webhook"}
	deploymentKey = handofftest.Key{Group: "apps", Kind: "Deployment", Namespace: widgetNS, Name: "widget-webhook"}
	secretKey     = handofftest.Key{Kind: "Secret", Namespace: widgetNS, Name: "widget-legacy-certs"}
	widgetKey     = handofftest.Key{Group: example.WidgetResource.Group, Kind: "Widget", Namespace: widgetNS, Name: widgetName}
	// releases lists what each release installs.
	releases = map[string][]handofftest.Key{
		"v1": {configKey, secretKey, serviceKey, deploymentKey},
		"v2": {configKey, serviceKey, deploymentKey},
	}
)

// The widget operator's whole life through a controller-runtime manager
// on the fake cluster over HTTP, the deployment controller played by
// handofftest.Rollouts: v1 installed, every object owned by the Widget;
// the upgrade to v2 never leaves an object both releases list absent,
// and deletes the Secret only v1 has once v2 has rolled out; deleting
// the Widget removes the release through its finalizer, by the
// operator's own deletes, before the Widget goes, and leaves nothing.
func TestWidgetLifeThroughAManager(t *testing.T) {
	c := handofftest.NewCluster(handofftest.RequireNamespaces(widgetNS))
	c.Register(example.WidgetResource, "Widget", true)
	logs := runOperator(t, c)
	ctx := context.Background()
	user := c.ClientFor("user").Resource(example.WidgetResource).Namespace(widgetNS)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\noperator log:\n%s", append(args, logs())...)
	}

	// Install v1.
	widget := handofftest.Object(example.WidgetResource.GroupVersion().String(), "Widget", widgetNS, widgetName, nil,
		map[string]any{"spec": map[string]any{"version": "v1"}})
	created, err := user.Create(ctx, widget, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(settleTimeout, func() error { return settled(c, "v1") }); err != nil {
		fail("install v1: %v", err)
	}
	for _, k := range releases["v1"] {
		obj, _ := c.Get(k)
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != created.GetUID() || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s: owners %v, want the Widget as controller", k, refs)
		}
	}

	// Upgrade to v2.
	from := c.Now()
	if _, err := user.Patch(ctx, widgetName, types.MergePatchType, []byte(`{"spec":{"version":"v2"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(settleTimeout, func() error { return settled(c, "v2") }); err != nil {
		fail("upgrade to v2: %v", err)
	}
	to := c.Now()
	for _, g := range c.Gaps(releases["v2"], from, to) {
		t.Errorf("I1: %s", g)
	}
	rolledOut := rolledOutAt(c, "v2", from)
	if rolledOut.IsZero() {
		fail("v2's Deployment never rolled out")
	}
	tl := c.Timeline(secretKey)
	if len(tl) != 1 || tl[0].To.IsZero() {
		fail("the Secret's lifetimes: %+v, want one, ended", tl)
	}
	if !tl[0].To.After(rolledOut) {
		t.Errorf("the Secret was deleted at %s, before v2 rolled out at %s", tl[0].To.Format(time.StampMilli), rolledOut.Format(time.StampMilli))
	}
	if actor := removedBy(c, secretKey); actor != operatorActor {
		t.Errorf("the Secret was deleted by %q, want %q", actor, operatorActor)
	}

	// Removal.
	if err := user.Delete(ctx, widgetName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(settleTimeout, func() error {
		if c.Exists(widgetKey) {
			return errors.New("the Widget is still there")
		}
		return nil
	}); err != nil {
		fail("removal: %v", err)
	}
	widgetGone := c.Timeline(widgetKey)[0].To
	for _, k := range releases["v2"] {
		if actor := removedBy(c, k); actor != operatorActor {
			t.Errorf("%s was deleted by %q, want the operator's finalizer, %q", k, actor, operatorActor)
		}
		if tl := c.Timeline(k); len(tl) == 0 || tl[len(tl)-1].To.IsZero() || !tl[len(tl)-1].To.Before(widgetGone) {
			t.Errorf("%s: lifetimes %+v, want the last ended before the Widget went at %s", k, tl, widgetGone.Format(time.StampMilli))
		}
	}
	var left []string
	for _, o := range c.Objects() {
		left = append(left, handofftest.KeyOf(o).String())
	}
	if d := cmp.Diff([]string{"Namespace " + widgetNS}, left); d != "" {
		t.Errorf("left after the removal (-want +got):\n%s", d)
	}
}

// runOperator runs the widget operator's manager against c over HTTP,
// and a Rollouts pass every few milliseconds, until the test ends. It
// returns the operator's log so far.
func runOperator(t *testing.T, c *handofftest.Cluster) (logs func() string) {
	t.Helper()
	srv := c.Serve(operatorActor)
	var mu sync.Mutex
	var buf strings.Builder
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(&buf, prefix, args)
	}, funcr.Options{})
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's informers log through klog
	logs = func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}

	mgr, err := ctrl.NewManager(srv.Config(), ctrl.Options{
		Scheme:  clientgoscheme.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := example.NewReconciler(mgr)
	if err != nil {
		t.Fatal(err)
	}
	r.Requeue = handoffctrl.Requeue{After: 20 * time.Millisecond}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mgrErr, rollErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		mgrErr = mgr.Start(ctx)
	}()
	go func() {
		defer wg.Done()
		rollouts := &handofftest.Rollouts{Passes: 2}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := rollouts.RollOut(ctx, c); err != nil && ctx.Err() == nil {
					rollErr = err
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		srv.Close()
		if mgrErr != nil {
			t.Errorf("manager: %v", mgrErr)
		}
		if rollErr != nil {
			t.Errorf("rollouts: %v", rollErr)
		}
	})
	return logs
}

// settled says why the widget's release is not yet version, installed
// and rolled out with its inventory alone, or nil once it is.
func settled(c *handofftest.Cluster, version string) error {
	var gens []string
	for _, o := range c.Objects() {
		if o.GetKind() != "ConfigMap" || o.GetLabels()[inventory.SetKindLabel] != inventory.SetKind {
			continue
		}
		if o.GetDeletionTimestamp() != nil {
			return fmt.Errorf("inventory %s is being deleted", o.GetName())
		}
		// Owned by the Widget, so the watch on inventories maps it back.
		if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "Widget" || refs[0].Name != widgetName {
			return fmt.Errorf("inventory %s has owners %v, want the Widget", o.GetName(), refs)
		}
		gens = append(gens, o.GetLabels()[inventory.GenerationLabel])
	}
	if len(gens) == 0 || slices.ContainsFunc(gens, func(g string) bool { return g != version }) {
		return fmt.Errorf("inventories of generations %v, want %s alone", gens, version)
	}
	for _, k := range releases[version] {
		if !c.Exists(k) {
			return fmt.Errorf("%s does not exist", k)
		}
	}
	if version != "v1" && c.Exists(secretKey) {
		return fmt.Errorf("%s is still there", secretKey)
	}
	d, _ := c.Get(deploymentKey)
	if img := image(d); img != "example.dev/widget-webhook:"+version {
		return fmt.Errorf("%s runs %s", deploymentKey, img)
	}
	if r := handoff.Rollout(d); r.State != handoff.Ready {
		return fmt.Errorf("%s: %s", deploymentKey, r)
	}
	return nil
}

// rolledOutAt is when the deployment controller first wrote, after from,
// a status of the Deployment rolled out at version's image; zero if
// never.
func rolledOutAt(c *handofftest.Cluster, version string, from time.Time) time.Time {
	for _, w := range c.Writes() {
		if w.Key == deploymentKey && w.Subresource == "status" && w.Actor == handofftest.DeploymentControllerActor && !w.Time.Before(from) &&
			image(w.Object) == "example.dev/widget-webhook:"+version && handoff.Rollout(w.Object).State == handoff.Ready {
			return w.Time
		}
	}
	return time.Time{}
}

// removedBy is the actor whose write last removed k, or "" if none did.
func removedBy(c *handofftest.Cluster, k handofftest.Key) string {
	actor := ""
	for _, w := range c.Writes() {
		if w.Key == k && (w.Effect == handofftest.Removed || w.Effect == handofftest.Deleting) {
			actor = w.Actor
		}
	}
	return actor
}

func image(d *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	img, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
	return img
}

// waitFor polls cond until it returns nil or timeout passes, and returns
// its last error then.
func waitFor(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
