// Command serve runs a control plane (package controlplane) until it is
// told to stop, for end-to-end tests that live outside this module and so
// cannot import an internal package: tektoncd/operator's reconcilers, run
// by integrations/tektoncd-operator/e2e.sh inside the patched operator tree.
//
// Usage:
//
//	serve -kubeconfig FILE [-crds PATH]...
//
// It starts etcd, kube-apiserver and kube-controller-manager from
// $HANDOFF_CONTROLPLANE_BIN (hack/controlplane/build.sh prints the
// directory), installs the CustomResourceDefinitions read from each -crds
// PATH (a YAML file, or a directory whose *.yaml files are read, not
// recursively) before the controller-manager starts, so that its garbage
// collector knows them from the start, and then writes an admin kubeconfig
// to FILE (renamed into place, so a reader that sees FILE sees all of it).
// It stops the control plane and exits on SIGINT or SIGTERM; its children
// die with it if it is killed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kube-handoff/handoff/internal/controlplane"
)

// paths is a repeatable flag.
type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var crds paths
	kubeconfig := flag.String("kubeconfig", "", "write the admin kubeconfig to this file once the control plane is up")
	flag.Var(&crds, "crds", "a CRD manifest file, or a directory of them (*.yaml); repeatable")
	timeout := flag.Duration("start-timeout", 3*time.Minute, "bound on the start")
	flag.Parse()
	if *kubeconfig == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*kubeconfig, crds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, crdPaths []string, timeout time.Duration) error {
	manifests, err := readCRDs(crdPaths)
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()

	began := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDs:         manifests,
		StartTimeout: timeout,
		Logf:         func(format string, args ...any) { fmt.Fprintf(os.Stderr, "serve: "+format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	defer cp.Stop()

	data, err := os.ReadFile(cp.Kubeconfig())
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	tmp := kubeconfig + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := os.Rename(tmp, kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	fmt.Fprintf(os.Stderr, "serve: control plane at %s up in %s, %d CRD manifests; kubeconfig in %s\n",
		cp.Host(), time.Since(began).Round(100*time.Millisecond), len(manifests), kubeconfig)

	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "serve: stopping")
	return nil
}

// readCRDs reads every file named, and every *.yaml file of every directory
// named, in name order.
func readCRDs(names []string) ([][]byte, error) {
	var files []string
	for _, name := range names {
		info, err := os.Stat(name)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, name)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(name, "*.yaml"))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("%s: no *.yaml files", name)
		}
		sort.Strings(matches)
		files = append(files, matches...)
	}
	var out [][]byte
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, data)
	}
	return out, errors.Join(errs...)
}
