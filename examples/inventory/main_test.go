package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff/handofftest"
)

// The widget operator's whole life, on a healthy cluster and on one whose
// API calls fail at random (before or after they take effect): nothing
// both releases list is ever absent during the upgrade (I1), the Secret
// only v1 has goes only once v2 has rolled out, and the removal leaves the
// namespaces and the protected PersistentVolumeClaim, released from the
// Widget, and nothing else.
func TestWidgetLife(t *testing.T) {
	tests := map[string]struct {
		faults bool
	}{
		"on a healthy cluster":                    {},
		"with random API faults and lost replies": {faults: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			if tc.faults {
				w.rounds = 60
				w.c.InjectFaults(handofftest.RandomFaults(7, 0.1), operatorActor)
			}
			s, err := w.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			s.print(&out)
			t.Log("\n" + out.String())
			if tc.faults {
				injected := 0
				for _, a := range w.c.Actions() {
					if a.Injected {
						injected++
					}
				}
				if injected == 0 {
					t.Fatal("no fault was injected: the case proves nothing")
				}
			}

			// I1.
			want := []handofftest.Key{
				{Kind: "ConfigMap", Namespace: widgetNS, Name: "widget-config"},
				{Kind: "PersistentVolumeClaim", Namespace: widgetNS, Name: "widget-data"},
				{Kind: "Service", Namespace: widgetNS, Name: "widget-webhook"},
				deploymentKey,
				{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Name: "validation.widgets.example.dev"},
			}
			if d := cmp.Diff(want, s.shared); d != "" {
				t.Fatalf("objects both releases list (-want +got):\n%s", d)
			}
			for _, g := range s.gaps {
				t.Errorf("I1: %s", g)
			}

			// The Secret lived once, from v1's install until after v2's
			// rollout.
			if s.rolledOut.IsZero() {
				t.Fatal("v2's Deployment never rolled out")
			}
			tl := w.c.Timeline(secretKey)
			if len(tl) != 1 || tl[0].To.IsZero() {
				t.Fatalf("the Secret's lifetimes: %+v, want one, ended", tl)
			}
			if !tl[0].To.After(s.rolledOut) {
				t.Errorf("the Secret was deleted at %s, before v2 rolled out at %s", clock(tl[0].To), clock(s.rolledOut))
			}
			if !tl[0].To.Before(s.chapters[1].to) {
				t.Errorf("the Secret was deleted at %s, after the upgrade settled", clock(tl[0].To))
			}

			// The removal: nothing left but what must stay, and that
			// released from the Widget.
			var left []string
			for _, o := range s.left {
				left = append(left, handofftest.KeyOf(o).String())
				if refs := o.GetOwnerReferences(); len(refs) > 0 {
					t.Errorf("%s still has owners after the removal: %v", handofftest.KeyOf(o), refs)
				}
			}
			wantLeft := []string{"Namespace widget-operator", "Namespace widgets", "PersistentVolumeClaim widgets/widget-data"}
			if d := cmp.Diff(wantLeft, left); d != "" {
				t.Errorf("left after the removal (-want +got):\n%s", d)
			}
			if !s.widgetGone {
				t.Error("the Widget is still there")
			}
		})
	}
}
