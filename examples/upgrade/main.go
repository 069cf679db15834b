// Command upgrade is the main demonstration of handoff: it upgrades a
// component shaped like tektoncd pipelines (over 60 resources in a static
// and a deployment set, with admission webhooks and an APIService) from
// v0.79.0 to v0.80.0 on the embedded fake cluster of package handofftest,
// reconcile by reconcile, printing every plan, then a summary with the
// availability gap of the resources both generations list.
//
// With -legacy it runs the same upgrade the way tektoncd/operator does
// today (delete the main sets, finalizers delete every listed resource by
// name, create the new sets afterwards) and prints both gaps side by side.
//
// With -live it runs the same upgrade against a real cluster instead,
// found as kubectl finds it: the file of -kubeconfig, else the files of
// $KUBECONFIG (merged), else ~/.kube/config, else the in-cluster config of
// a pod; -context picks a kubeconfig context. -kubeconfig and -context
// imply -live. It installs the TektonInstallerSet CRD if absent, runs the
// library's executor and the set controller of package handofftest in
// process against the API server (whose garbage collector then acts for
// real), records every absence of a shared resource with watches, prints
// the same summary in wall time, and removes the component at the end. It
// writes cluster-scoped objects named like tektoncd pipelines' (CRDs
// *.tekton.dev, webhook configurations, an APIService), so use a disposable
// cluster (kind, or hack/controlplane); it refuses to touch any object, or
// a set CRD, that it did not install itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/handofftest/tektonfixture"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const namespace = "tekton-pipelines"

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "upgrade:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	if o.live {
		s, err := runCluster(ctx, os.Stdout, o.target)
		if err != nil {
			fmt.Fprintln(os.Stderr, "upgrade:", err)
			os.Exit(1)
		}
		fmt.Println()
		fmt.Println(s)
		return
	}
	ours, err := run(ctx, os.Stdout, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upgrade:", err)
		os.Exit(1)
	}
	fmt.Println(ours)
	if o.legacy {
		old, err := run(ctx, io.Discard, true)
		if err != nil {
			fmt.Fprintln(os.Stderr, "legacy upgrade:", err)
			os.Exit(1)
		}
		fmt.Println(old)
	}
}

// options are the command's flags.
type options struct {
	legacy bool
	live   bool
	target target
}

// parseFlags reads the command's flags from args; usage and flag errors go
// to errOut.
func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("upgrade", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.BoolVar(&o.legacy, "legacy", false, "also run the upgrade as tektoncd/operator does today, and compare the gaps")
	fs.BoolVar(&o.live, "live", false, "run the upgrade against a real cluster instead of the fake one: the cluster of -kubeconfig, else of $KUBECONFIG, else of ~/.kube/config, else the in-cluster config")
	fs.StringVar(&o.target.Kubeconfig, "kubeconfig", "", "kubeconfig `file` of the cluster to run against, instead of $KUBECONFIG and ~/.kube/config (implies -live)")
	fs.StringVar(&o.target.Context, "context", "", "kubeconfig `context` to use instead of the current one (implies -live)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.live = o.live || o.target != target{}
	if o.live && o.legacy {
		return o, errors.New("-legacy runs only on the fake cluster")
	}
	return o, nil
}

// summary is what one upgrade did to the component's resources.
type summary struct {
	name                       string
	shared, obsolete, created  int
	keptShared, pruned, exists int
	gaps                       []handofftest.Gap
	longest                    time.Duration
	rounds                     int
	// clock names the clock of longest; empty means "fake time".
	clock string
}

func (s summary) String() string {
	clock := s.clock
	if clock == "" {
		clock = "fake time"
	}
	return fmt.Sprintf(`== %s: %d reconciles
   shared resources (listed by both generations): %d, never absent: %d
   obsolete resources (only in the old generation): %d, pruned: %d
   new resources (only in the new generation): %d, created: %d
   availability gap: %d absences of shared resources, longest %s of %s
`, s.name, s.rounds, s.shared, s.keptShared, s.obsolete, s.pruned, s.created, s.exists, len(s.gaps), s.longest, clock)
}

func keys(ms map[string][]*unstructured.Unstructured) map[handofftest.Key]bool {
	out := map[handofftest.Key]bool{}
	for _, list := range ms {
		for _, m := range list {
			out[handofftest.KeyOf(m)] = true
		}
	}
	return out
}

// newSummary starts the summary of an upgrade of w from v0.79.0 to v0.80.0
// with what the two generations list: it returns the keys of each and the
// keys both list.
func newSummary(name string, w *handofftest.World) (s summary, oldKeys, newKeys map[handofftest.Key]bool, shared []handofftest.Key) {
	oldKeys, newKeys = keys(w.Manifests["v0.79.0"]), keys(w.Manifests["v0.80.0"])
	s.name = name
	for k := range oldKeys {
		if newKeys[k] {
			shared = append(shared, k)
		} else {
			s.obsolete++
		}
	}
	s.shared = len(shared)
	for k := range newKeys {
		if !oldKeys[k] {
			s.created++
		}
	}
	return s, oldKeys, newKeys, shared
}

func run(ctx context.Context, out io.Writer, legacy bool) (summary, error) {
	w := handofftest.NewWorld("TektonPipeline")
	roles := []string{"static", "deployment"}
	v1 := w.Desire("v0.79.0", roles, tektonfixture.Pipelines(namespace, "v0.79.0"))
	v2 := w.Desire("v0.80.0", roles, tektonfixture.Pipelines(namespace, "v0.80.0"))
	fmt.Fprintln(out, "# install v0.79.0")
	w.Plans = out
	if _, err := w.Converge(ctx, v1, 50); err != nil {
		return summary{}, err
	}
	name := "handoff"
	if legacy {
		name = "tektoncd/operator today"
	}
	s, oldKeys, newKeys, shared := newSummary(name, w)
	fmt.Fprintln(out, "\n# upgrade to v0.80.0")
	start := w.Cluster.Now()
	var err error
	if legacy {
		s.rounds, err = w.ConvergeLegacy(ctx, v2, 50)
	} else {
		s.rounds, err = w.Converge(ctx, v2, 50)
	}
	if err != nil {
		return s, err
	}
	if err := handofftest.CheckConverged(w.Cluster, w.Family, v2); err != nil {
		return s, err
	}
	s.gaps = w.Cluster.Gaps(shared, start, w.Cluster.Now())
	absent := map[handofftest.Key]bool{}
	for _, g := range s.gaps {
		absent[g.Key] = true
		s.longest = max(s.longest, g.To.Sub(g.From))
	}
	s.keptShared = len(shared) - len(absent)
	for k := range oldKeys {
		if !newKeys[k] && !w.Cluster.Exists(k) {
			s.pruned++
		}
	}
	for k := range newKeys {
		if !oldKeys[k] && w.Cluster.Exists(k) {
			s.exists++
		}
	}
	return s, nil
}
