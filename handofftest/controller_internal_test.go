package handofftest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The set controller makes its set the controller of what it applies (the
// guard let it write, so the controller it replaces is on its way out) and
// keeps every other owner, such as the ones a handover adds; an object
// already so owned gets the same references back, so it is not written.
func TestWithController(t *testing.T) {
	ref := func(uid string, controller bool) metav1.OwnerReference {
		r := metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: uid, UID: types.UID(uid)}
		if controller {
			r.Controller, r.BlockOwnerDeletion = ptr(true), ptr(true)
		}
		return r
	}
	own := ref("own", true)
	for name, tt := range map[string]struct {
		refs []metav1.OwnerReference
		want []metav1.OwnerReference
	}{
		"no owner yet": {
			want: []metav1.OwnerReference{own},
		},
		"already the controller": {
			refs: []metav1.OwnerReference{own},
			want: []metav1.OwnerReference{own},
		},
		"the old generation's set controls it": {
			refs: []metav1.OwnerReference{ref("old", true)},
			want: []metav1.OwnerReference{own},
		},
		"a handover left the set controller and a sibling as owner": {
			refs: []metav1.OwnerReference{own, ref("sibling", false)},
			want: []metav1.OwnerReference{own, ref("sibling", false)},
		},
		"the set takes the control an old set had, its other owners stay": {
			refs: []metav1.OwnerReference{ref("other", false), ref("old", true), ref("own", false)},
			want: []metav1.OwnerReference{ref("other", false), own},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, withController(tt.refs, own)); diff != "" {
				t.Errorf("ownerReferences (-want +got):\n%s", diff)
			}
		})
	}
}
