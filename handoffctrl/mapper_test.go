package handoffctrl_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	"github.com/kube-handoff/handoff/handoffctrl"
	"github.com/kube-handoff/handoff/handofftest"
	"github.com/kube-handoff/handoff/inventory"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

var certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// An upgrade whose old release lists a kind the cluster no longer serves
// (eventing 1.14.5 → 1.15.0 drops cert-manager Certificates, whose CRD
// may be gone by then), run by an operator that started after the CRD
// went: with NewMapper the executor resets the mapper, finds the kind not
// served and retires the old inventory; with controller-runtime's own
// mapper every Step stops with ErrStaleMapper and the old inventory
// stays for good.
func TestMapperRetiresASetListingAnUnservedKind(t *testing.T) {
	tests := map[string]struct {
		mapper  func(cfg *rest.Config) (meta.RESTMapper, error)
		wantErr error
	}{
		"NewMapper: the old inventory retires, its Certificate unserved": {
			mapper: func(cfg *rest.Config) (meta.RESTMapper, error) { return handoffctrl.NewMapper(cfg) },
		},
		"the manager's mapper: every Step fails with ErrStaleMapper": {
			mapper: func(cfg *rest.Config) (meta.RESTMapper, error) {
				hc, err := rest.HTTPClientFor(cfg)
				if err != nil {
					return nil, err
				}
				return apiutil.NewDynamicRESTMapper(cfg, hc)
			},
			wantErr: handoff.ErrStaleMapper,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := handofftest.NewCluster()
			c.Register(certificates, "Certificate", true)
			inv := inventory.Inventory{Namespace: "widgets", Component: "widget-demo"}
			config := handofftest.Object("v1", "ConfigMap", "widgets", "widget-config", nil, map[string]any{"data": map[string]any{"a": "b"}})
			cert := handofftest.Object("cert-manager.io/v1", "Certificate", "widgets", "widget-cert", nil, map[string]any{"spec": map[string]any{"secretName": "widget-cert"}})

			// v1, installed by the operator before its upgrade.
			install := inv.Executor(c.ClientFor("operator"), c.Mapper())
			settle(t, install, inv, "v1", []unstructured.Unstructured{*config, *cert})
			if err := c.Add(config, cert); err != nil {
				t.Fatal(err)
			}
			// The CRD goes, its objects first, as the API server does.
			if err := c.Dynamic().Resource(certificates).Namespace("widgets").Delete(ctx, "widget-cert", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			c.Unregister(certificates)

			// The upgraded operator starts, over HTTP.
			srv := c.Serve("operator")
			defer srv.Close()
			dyn, err := dynamic.NewForConfig(srv.Config())
			if err != nil {
				t.Fatal(err)
			}
			mapper, err := tc.mapper(srv.Config())
			if err != nil {
				t.Fatal(err)
			}
			exec := inv.Executor(dyn, mapper)
			gen, err := inv.Generation("v2", []unstructured.Unstructured{*config})
			if err != nil {
				t.Fatal(err)
			}
			exec.Build = gen.Build
			var unserved []handoff.Ref
			var errs []error
			settledAt := 0
			for i := 1; i <= 10 && settledAt == 0; i++ {
				res, err := exec.Step(ctx, gen.Desired)
				errs = append(errs, err)
				for _, it := range res.Unserved {
					unserved = append(unserved, it.Ref)
				}
				if err == nil && !res.Requeue {
					settledAt = i
				}
			}

			t.Logf("errors %v, unserved %v, settled at %d", errs, unserved, settledAt)
			gens := map[string]bool{}
			for _, o := range c.Objects() {
				if handoffctrl.IsInventory(o) {
					gens[o.GetLabels()[inventory.GenerationLabel]] = true
				}
			}
			if tc.wantErr != nil {
				// The first Step records v2's inventory; every one after it
				// tries to retire v1's and fails.
				if settledAt != 0 {
					t.Fatalf("the upgrade settled at Step %d, want every Step to fail", settledAt)
				}
				for i, err := range errs[1:] {
					if !errors.Is(err, tc.wantErr) {
						t.Errorf("Step %d: %v, want an error wrapping %v", i+2, err, tc.wantErr)
					}
				}
				if !gens["v1"] {
					t.Errorf("inventories of %v: v1's is gone", gens)
				}
				return
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("Step %d: %v", i+1, err)
				}
			}
			if settledAt == 0 {
				t.Fatal("the upgrade did not settle in 10 Steps")
			}
			if d := cmp.Diff(map[string]bool{"v2": true}, gens); d != "" {
				t.Errorf("inventories by generation (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]handoff.Ref{handoff.RefOf(cert)}, unserved); d != "" {
				t.Errorf("unserved (-want +got):\n%s", d)
			}
			if !c.Exists(handofftest.KeyOf(config)) {
				t.Error("the ConfigMap both releases list is gone")
			}
		})
	}
}

// settle Steps exec to generation over objs until it no longer requeues.
func settle(t *testing.T, exec *handoff.Executor, inv inventory.Inventory, generation string, objs []unstructured.Unstructured) {
	t.Helper()
	gen, err := inv.Generation(generation, objs)
	if err != nil {
		t.Fatal(err)
	}
	exec.Build = gen.Build
	for i := 0; i < 10; i++ {
		res, err := exec.Step(context.Background(), gen.Desired)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Requeue {
			return
		}
	}
	t.Fatalf("generation %s did not settle in 10 Steps", generation)
}
