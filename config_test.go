package handoff_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// checkConfigError checks that err is a *ConfigError naming exactly the
// fields want, in order, that matches ErrInvalidFamily and says every
// field in its message.
func checkConfigError(t *testing.T, call string, err error, want []string) {
	t.Helper()
	var ce *handoff.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v, want a *ConfigError naming %v", call, err, want)
	}
	if d := cmp.Diff(want, ce.Fields()); d != "" {
		t.Errorf("%s: fields at fault (-want +got):\n%s", call, d)
	}
	if !errors.Is(err, handoff.ErrInvalidFamily) {
		t.Errorf("%s: %v does not match ErrInvalidFamily", call, err)
	}
	for _, f := range want {
		if !strings.Contains(err.Error(), f+": ") {
			t.Errorf("%s: message %q does not name %s", call, err, f)
		}
	}
}

// Every misconfiguration fails Step and Finalize with a *ConfigError
// naming each field at fault, before the executor reads or writes
// anything: the cluster sees no call at all.
func TestMisconfiguredExecutorTouchesNothing(t *testing.T) {
	tests := map[string]struct {
		mod func(e *handoff.Executor, c *handofftest.Cluster)
		// step: the fields a Step with a desired generation names.
		step []string
		// other: those a removal (Step with nil) and Finalize name; nil
		// when they do not fail for the configuration.
		other []string
	}{
		"no Mapper: an install would write, and a later retirement fail": {
			mod:   func(e *handoff.Executor, _ *handofftest.Cluster) { e.Mapper = nil },
			step:  []string{"Executor.Mapper"},
			other: []string{"Executor.Mapper"},
		},
		"no Build: only a Step with a desired generation needs one": {
			mod:  func(e *handoff.Executor, _ *handofftest.Cluster) { e.Build = nil },
			step: []string{"Executor.Build"},
		},
		"neither Sets nor Dynamic, Objects given": {
			mod: func(e *handoff.Executor, c *handofftest.Cluster) {
				e.Objects = handoff.NewDynamicObjects(c.ClientFor("executor"), c.Mapper())
				e.Dynamic = nil
			},
			step:  []string{"Executor.Sets"},
			other: []string{"Executor.Sets"},
		},
		"Sets given, neither Dynamic nor Objects": {
			mod: func(e *handoff.Executor, c *handofftest.Cluster) {
				e.Sets = c.ClientFor("executor").Resource(handofftest.SetResource)
				e.Dynamic = nil
			},
			step:  []string{"Executor.Dynamic"},
			other: []string{"Executor.Dynamic"},
		},
		"no client at all, no Mapper, no Build": {
			mod: func(e *handoff.Executor, _ *handofftest.Cluster) {
				e.Dynamic, e.Mapper, e.Build = nil, nil, nil
			},
			step:  []string{"Executor.Sets", "Executor.Dynamic", "Executor.Mapper", "Executor.Build"},
			other: []string{"Executor.Sets", "Executor.Dynamic", "Executor.Mapper"},
		},
		"Owners without AnyUnowned: what only the owner owns would leak": {
			mod:   func(e *handoff.Executor, _ *handofftest.Cluster) { e.Prune.Owners = []types.UID{"uid-component"} },
			step:  []string{"Executor.Prune.Owners"},
			other: []string{"Executor.Prune.Owners"},
		},
		"propagation policies that are none": {
			mod: func(e *handoff.Executor, _ *handofftest.Cluster) {
				e.Propagation, e.ResourcePropagation = "Cascade", "background"
			},
			step:  []string{"Executor.Propagation", "Executor.ResourcePropagation"},
			other: []string{"Executor.Propagation", "Executor.ResourcePropagation"},
		},
		"negative StepTimeout and Concurrency": {
			mod: func(e *handoff.Executor, _ *handofftest.Cluster) {
				e.StepTimeout, e.Concurrency = -time.Second, -1
			},
			step:  []string{"Executor.StepTimeout", "Executor.Concurrency"},
			other: []string{"Executor.StepTimeout", "Executor.Concurrency"},
		},
		"Recorder without Component": {
			mod:   func(e *handoff.Executor, _ *handofftest.Cluster) { e.Recorder = record.NewFakeRecorder(10) },
			step:  []string{"Executor.Component"},
			other: []string{"Executor.Component"},
		},
		"Component without Recorder": {
			mod: func(e *handoff.Executor, _ *handofftest.Cluster) {
				e.Component = handofftest.Object("v1", "ConfigMap", testNS, "component", nil, nil)
			},
			step:  []string{"Executor.Recorder"},
			other: []string{"Executor.Recorder"},
		},
		"a family without selector and generation label, and no Build": {
			mod: func(e *handoff.Executor, _ *handofftest.Cluster) {
				e.Family.Selector, e.Family.GenerationLabel, e.Build = nil, "", nil
			},
			step:  []string{"Executor.Family.Selector", "Executor.Family.GenerationLabel", "Executor.Build"},
			other: []string{"Executor.Family.Selector", "Executor.Family.GenerationLabel"},
		},
		"a namespaced set kind without a namespace": {
			mod:   func(e *handoff.Executor, _ *handofftest.Cluster) { e.Family.Namespaced = true },
			step:  []string{"Executor.Family.Namespace"},
			other: []string{"Executor.Family.Namespace"},
		},
		"a namespace for a cluster-scoped set kind": {
			mod:   func(e *handoff.Executor, _ *handofftest.Cluster) { e.Family.Namespace = testNS },
			step:  []string{"Executor.Family.Namespaced"},
			other: []string{"Executor.Family.Namespaced"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w, _, v2 := newSmall(t)
			old, ok := w.Cluster.Get(finSetKey(w, "v1", "static"))
			if !ok {
				t.Fatal("no v1 static set")
			}
			e := *w.Executor
			tc.mod(&e, w.Cluster)
			writes := len(w.Cluster.Writes())
			w.Cluster.ClearActions()

			res, err := e.Step(ctx, v2)
			checkConfigError(t, "Step(v2)", err, tc.step)
			if d := cmp.Diff(handoff.Result{}, res); d != "" {
				t.Errorf("result of a refused Step (-want +got):\n%s", d)
			}
			if err := e.Validate(); tc.other == nil && err != nil {
				t.Errorf("Validate() = %v, want nil: only a Step with a desired generation needs what is missing", err)
			}
			if tc.other != nil {
				checkConfigError(t, "Validate()", e.Validate(), tc.other)
				_, err = e.Step(ctx, nil)
				checkConfigError(t, "Step(nil)", err, tc.other)
				fres, err := e.Finalize(ctx, old)
				checkConfigError(t, "Finalize", err, tc.other)
				if d := cmp.Diff(handoff.FinalizeResult{}, fres); d != "" {
					t.Errorf("result of a refused Finalize (-want +got):\n%s", d)
				}
			}
			if got := w.Cluster.Writes()[writes:]; len(got) != 0 {
				t.Errorf("a misconfigured executor wrote: %v", got)
			}
			if got := w.Cluster.Calls(); len(got) != 0 {
				t.Errorf("a misconfigured executor made calls: %v", got)
			}
		})
	}
}

// The executor every test world starts from is valid, and so is one that
// only removes or finalizes, without Build.
func TestValidExecutors(t *testing.T) {
	w := handofftest.NewWorld("Comp")
	if err := w.Executor.Validate(); err != nil {
		t.Errorf("the world's executor: %v", err)
	}
	e := *w.Executor
	e.Build = nil
	if err := e.Validate(); err != nil {
		t.Errorf("without Build: %v", err)
	}
	e.Prune.Owners, e.Prune.AnyUnowned = []types.UID{"uid-component"}, true
	e.Propagation, e.ResourcePropagation = "Orphan", "Foreground"
	e.Recorder, e.Component = record.NewFakeRecorder(1), handofftest.Object("v1", "ConfigMap", testNS, "component", nil, nil)
	if err := e.Validate(); err != nil {
		t.Errorf("with Owners, AnyUnowned, policies and events: %v", err)
	}
}

// Family.Validate names every field at fault at once.
func TestFamilyValidateNamesEveryField(t *testing.T) {
	tests := map[string]struct {
		fam  handoff.Family
		want []string // nil: valid
	}{
		"the zero family": {
			want: []string{"Family.Resource", "Family.Selector", "Family.GenerationLabel"},
		},
		"a kind selector the family selector lacks, a namespace without Namespaced": {
			fam: handoff.Family{Resource: handofftest.SetResource, Selector: map[string]string{"app": "x"}, GenerationLabel: "gen",
				KindSelector: map[string]string{"kind": "set"}, Namespace: "ns"},
			want: []string{"Family.KindSelector", "Family.Namespaced"},
		},
		"namespaced, its namespace no DNS label": {
			fam: handoff.Family{Resource: handofftest.SetResource, Selector: map[string]string{"app": "x"}, GenerationLabel: "gen",
				Namespaced: true, Namespace: "Not_A_Label"},
			want: []string{"Family.Namespace"},
		},
		"namespaced, with its namespace": {
			fam: handoff.Family{Resource: handofftest.SetResource, Selector: map[string]string{"app": "x"}, GenerationLabel: "gen",
				Namespaced: true, Namespace: "ns"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.fam.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			checkConfigError(t, "Validate()", err, tc.want)
		})
	}
}
