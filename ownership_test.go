package handoff_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-handoff/handoff"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var (
	owRetiring = prSet("static-v1", "v1", "static", 1)
	owSibling  = prSet("deployment-v1", "v1", "deployment", 2)
	owNew      = prSet("static-v2", "v2", "static", 3)
	owFamily   = []handoff.Set{owSibling, owNew}
)

func owPtr(b bool) *bool { return &b }

func owRef(name string, uid types.UID, controller *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet",
		Name: name, UID: uid, Controller: controller, BlockOwnerDeletion: controller}
}

func owForeign() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs"}
}

// owLive builds a live object of the kind of r with the given owners and
// annotations.
func owLive(r handoff.Ref, owners []metav1.OwnerReference, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: r.Group, Version: "v1", Kind: r.Kind})
	u.SetNamespace(r.Namespace)
	u.SetName(r.Name)
	u.SetOwnerReferences(owners)
	u.SetAnnotations(ann)
	return u
}

func TestOwnerOf(t *testing.T) {
	tests := map[string]struct {
		owners []metav1.OwnerReference
		want   handoff.Owner
	}{
		"no ownerReferences":                       {nil, handoff.Unowned},
		"only the set, by UID":                     {[]metav1.OwnerReference{owRef("static-v1", "uid-static-v1", owPtr(true))}, handoff.OwnedBySet},
		"the set twice":                            {[]metav1.OwnerReference{owRef("static-v1", "uid-static-v1", owPtr(true)), owRef("static-v1", "uid-static-v1", nil)}, handoff.OwnedBySet},
		"another set of the family":                {[]metav1.OwnerReference{owRef("static-v2", "uid-static-v2", owPtr(true))}, handoff.OwnedByFamily},
		"the set and a sibling":                    {[]metav1.OwnerReference{owRef("static-v1", "uid-static-v1", owPtr(true)), owRef("deployment-v1", "uid-deployment-v1", nil)}, handoff.OwnedByFamily},
		"the set and a foreign owner":              {[]metav1.OwnerReference{owRef("static-v1", "uid-static-v1", owPtr(true)), owForeign()}, handoff.OwnedByOther},
		"a foreign owner first, then the set":      {[]metav1.OwnerReference{owForeign(), owRef("static-v1", "uid-static-v1", nil)}, handoff.OwnedByOther},
		"the set's name with another UID":          {[]metav1.OwnerReference{owRef("static-v1", "uid-recreated", owPtr(true))}, handoff.OwnedByOther},
		"a family set's name with another UID":     {[]metav1.OwnerReference{owRef("static-v2", "uid-other", owPtr(true))}, handoff.OwnedByOther},
		"the set's UID under another name is ours": {[]metav1.OwnerReference{owRef("renamed", "uid-static-v1", owPtr(true))}, handoff.OwnedBySet},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := handoff.OwnerOf(owLive(prCM("x"), tc.owners, nil), owRetiring, owFamily)
			if got != tc.want {
				t.Errorf("OwnerOf = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOwnershipLiveVerdict(t *testing.T) {
	mine := []metav1.OwnerReference{owRef("static-v1", "uid-static-v1", owPtr(true))}
	keep := map[string]string{handoff.DefaultKeepAnnotation: handoff.KeepValue}
	apiService := handoff.Ref{Group: "apiregistration.k8s.io", Kind: "APIService", Name: "v1beta1.custom.metrics.k8s.io"}
	mutating := handoff.Ref{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration", Name: "webhook.pipeline.tekton.dev"}
	del := func(r handoff.Ref) handoff.Item { return prDelete(r) }
	type verdict struct {
		V      handoff.Verdict
		Reason string
	}
	tests := []struct {
		name string
		item handoff.Item
		live *unstructured.Unstructured
		opts handoff.PruneOptions
		want verdict
	}{{
		name: "owned by the retiring set alone: delete",
		item: del(prCM("config-v1-only")), live: owLive(prCM("config-v1-only"), mine, nil), opts: prOptions,
		want: verdict{handoff.Delete, "owned by static-v1 alone, listed by no other set"},
	}, {
		name: "owned by another set of the family: skip",
		item: del(prCM("moved")), live: owLive(prCM("moved"), []metav1.OwnerReference{owRef("static-v2", "uid-static-v2", owPtr(true))}, nil), opts: prOptions,
		want: verdict{handoff.Skip, "owned by another set of the family"},
	}, {
		name: "co-owned by the retiring set and a sibling: skip",
		item: del(prCM("co")), live: owLive(prCM("co"), append(mine, owRef("deployment-v1", "uid-deployment-v1", nil)), nil), opts: prOptions,
		want: verdict{handoff.Skip, "owned by another set of the family"},
	}, {
		name: "owned by something outside the family: skip",
		item: del(prCM("foreign")), live: owLive(prCM("foreign"), []metav1.OwnerReference{owForeign()}, nil), opts: prOptions,
		want: verdict{handoff.Skip, "owned by an object outside the family"},
	}, {
		name: "co-owned by the retiring set and a foreign owner: skip",
		item: del(prCM("co-foreign")), live: owLive(prCM("co-foreign"), append(mine, owForeign()), nil), opts: prOptions,
		want: verdict{handoff.Skip, "owned by an object outside the family"},
	}, {
		name: "owned by a re-created set of the same name (another UID): skip",
		item: del(prCM("recreated")), live: owLive(prCM("recreated"), []metav1.OwnerReference{owRef("static-v1", "uid-new", owPtr(true))}, nil), opts: prOptions,
		want: verdict{handoff.Skip, "owned by an object outside the family"},
	}, {
		name: "unowned validating webhook configuration listed by no other set: delete",
		item: del(prHook), live: owLive(prHook, nil, nil), opts: prOptions,
		want: verdict{handoff.Delete, "installed without an owner, listed by no other set"},
	}, {
		name: "unowned mutating webhook configuration: delete",
		item: del(mutating), live: owLive(mutating, nil, nil), opts: prOptions,
		want: verdict{handoff.Delete, "installed without an owner, listed by no other set"},
	}, {
		name: "unowned APIService: delete",
		item: del(apiService), live: owLive(apiService, nil, nil), opts: prOptions,
		want: verdict{handoff.Delete, "installed without an owner, listed by no other set"},
	}, {
		name: "unowned ConfigMap, a kind set controllers always own: skip",
		item: del(prCM("adopted-by-nobody")), live: owLive(prCM("adopted-by-nobody"), nil, nil), opts: prOptions,
		want: verdict{handoff.Skip, "has no owner and its kind is not installed without one"},
	}, {
		name: "unowned webhook configuration with zero options (no Unowned kinds): skip",
		item: del(prHook), live: owLive(prHook, nil, nil),
		want: verdict{handoff.Skip, "has no owner and its kind is not installed without one"},
	}, {
		name: "Unowned lists the ConfigMap kind: an unowned ConfigMap is deleted",
		item: del(prCM("c")), live: owLive(prCM("c"), nil, nil), opts: handoff.PruneOptions{Unowned: []schema.GroupKind{{Kind: "ConfigMap"}}},
		want: verdict{handoff.Delete, "installed without an owner, listed by no other set"},
	}, {
		name: "Unowned matches the group: a webhook kind of another group is skipped",
		item: del(handoff.Ref{Group: "example.com", Kind: "ValidatingWebhookConfiguration", Name: "w"}),
		live: owLive(handoff.Ref{Group: "example.com", Kind: "ValidatingWebhookConfiguration", Name: "w"}, nil, nil), opts: prOptions,
		want: verdict{handoff.Skip, "has no owner and its kind is not installed without one"},
	}, {
		name: "an Unowned kind that has a foreign owner: skip",
		item: del(prHook), live: owLive(prHook, []metav1.OwnerReference{owForeign()}, nil), opts: prOptions,
		want: verdict{handoff.Skip, "owned by an object outside the family"},
	}, {
		name: "keep annotation on an owned object: skip",
		item: del(prCM("kept")), live: owLive(prCM("kept"), mine, keep), opts: prOptions,
		want: verdict{handoff.Skip, "annotated handoff.kube-handoff.io/on-remove=keep"},
	}, {
		name: "keep annotation on an unowned webhook configuration: skip",
		item: del(prHook), live: owLive(prHook, nil, keep), opts: prOptions,
		want: verdict{handoff.Skip, "annotated handoff.kube-handoff.io/on-remove=keep"},
	}, {
		name: "keep annotation with another value does not keep",
		item: del(prCM("kept")), live: owLive(prCM("kept"), mine, map[string]string{handoff.DefaultKeepAnnotation: "delete"}), opts: prOptions,
		want: verdict{handoff.Delete, "owned by static-v1 alone, listed by no other set"},
	}, {
		name: "keep annotation ignored when the option names none",
		item: del(prCM("kept")), live: owLive(prCM("kept"), mine, keep), opts: handoff.PruneOptions{},
		want: verdict{handoff.Delete, "owned by static-v1 alone, listed by no other set"},
	}, {
		name: "a custom keep annotation",
		item: del(prCM("kept")), live: owLive(prCM("kept"), mine, map[string]string{"helm.sh/resource-policy": handoff.KeepValue}),
		opts: handoff.PruneOptions{KeepAnnotation: "helm.sh/resource-policy"},
		want: verdict{handoff.Skip, "annotated helm.sh/resource-policy=keep"},
	}, {
		name: "object already gone: skip",
		item: del(prCM("gone")), live: nil, opts: prOptions,
		want: verdict{handoff.Skip, "already gone"},
	}, {
		name: "a Keep item passes through, whatever the live object",
		item: prKeep(prCM("shared"), owNew), live: owLive(prCM("shared"), mine, nil), opts: prOptions,
		want: verdict{handoff.Keep, "listed by static-v2 (v2/static)"},
	}, {
		name: "a Skip item passes through",
		item: prProtected(prNSRef), live: owLive(prNSRef, nil, nil), opts: prOptions,
		want: verdict{handoff.Skip, "protected kind"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, reason := handoff.LiveVerdict(tc.item, tc.live, owRetiring, owFamily, tc.opts)
			if d := cmp.Diff(tc.want, verdict{v, reason}); d != "" {
				t.Errorf("LiveVerdict (-want +got):\n%s", d)
			}
		})
	}
}

func TestOwnershipHandover(t *testing.T) {
	fam := handoff.Family{Resource: schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"},
		Kind: "TektonInstallerSet"}
	to := fam.OwnerReference(owNew) // controller and blockOwnerDeletion true
	const from = types.UID("uid-static-v1")
	oldCtrl := owRef("static-v1", from, owPtr(true))
	oldPlain := metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet", Name: "static-v1", UID: from}
	oldCtrlNoBlock := oldCtrl
	oldCtrlNoBlock.BlockOwnerDeletion = nil
	sibling := owRef("deployment-v1", "uid-deployment-v1", nil)
	foreignCtrl := owForeign()
	foreignCtrl.Controller = owPtr(true)
	// newRef is the successor's reference as Handover writes it.
	newRef := func(controller, block *bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet",
			Name: "static-v2", UID: "uid-static-v2", Controller: controller, BlockOwnerDeletion: block}
	}
	also := metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet",
		Name: "deployment-v2", UID: "uid-deployment-v2", Controller: owPtr(true), BlockOwnerDeletion: owPtr(true)}
	alsoAs := func(block *bool) metav1.OwnerReference {
		r := also
		r.Controller, r.BlockOwnerDeletion = nil, block
		return r
	}
	tests := []struct {
		name        string
		refs        []metav1.OwnerReference
		to          []metav1.OwnerReference // nil: {to}
		want        []metav1.OwnerReference
		wantChanged bool
	}{{
		name:        "controller reference to the retiring set moves to the successor",
		refs:        []metav1.OwnerReference{oldCtrl},
		want:        []metav1.OwnerReference{newRef(owPtr(true), owPtr(true))},
		wantChanged: true,
	}, {
		name:        "a non-controller reference is replaced by a non-controller one",
		refs:        []metav1.OwnerReference{oldPlain},
		want:        []metav1.OwnerReference{newRef(nil, nil)},
		wantChanged: true,
	}, {
		name:        "blockOwnerDeletion is carried over from the removed reference",
		refs:        []metav1.OwnerReference{oldCtrlNoBlock},
		want:        []metav1.OwnerReference{newRef(owPtr(true), nil)},
		wantChanged: true,
	}, {
		name:        "other references stay as they are, in order; the successor comes last",
		refs:        []metav1.OwnerReference{owForeign(), oldCtrl, sibling},
		want:        []metav1.OwnerReference{owForeign(), sibling, newRef(owPtr(true), owPtr(true))},
		wantChanged: true,
	}, {
		name:        "another controller keeps the flag: the successor is added without it",
		refs:        []metav1.OwnerReference{foreignCtrl, oldCtrl},
		want:        []metav1.OwnerReference{foreignCtrl, newRef(nil, owPtr(true))},
		wantChanged: true,
	}, {
		name:        "successor already an owner without the flag: gets it in place, retiring one removed",
		refs:        []metav1.OwnerReference{newRef(nil, nil), sibling, oldCtrl},
		want:        []metav1.OwnerReference{newRef(owPtr(true), nil), sibling},
		wantChanged: true,
	}, {
		name:        "successor already an owner, retiring one not controller: only the retiring one goes",
		refs:        []metav1.OwnerReference{oldPlain, newRef(nil, nil)},
		want:        []metav1.OwnerReference{newRef(nil, nil)},
		wantChanged: true,
	}, {
		name:        "already handed over: unchanged",
		refs:        []metav1.OwnerReference{sibling, newRef(owPtr(true), owPtr(true))},
		want:        []metav1.OwnerReference{sibling, newRef(owPtr(true), owPtr(true))},
		wantChanged: false,
	}, {
		name:        "to every lister: the first becomes the controller, the others plain owners",
		refs:        []metav1.OwnerReference{oldCtrl},
		to:          []metav1.OwnerReference{to, also},
		want:        []metav1.OwnerReference{newRef(owPtr(true), owPtr(true)), alsoAs(owPtr(true))},
		wantChanged: true,
	}, {
		name:        "to no one: the object only stops naming the retiring set",
		refs:        []metav1.OwnerReference{owForeign(), oldCtrl},
		to:          []metav1.OwnerReference{},
		want:        []metav1.OwnerReference{owForeign()},
		wantChanged: true,
	}, {
		name:        "to no one, naming only the retiring set: no owner is left",
		refs:        []metav1.OwnerReference{oldCtrl},
		to:          []metav1.OwnerReference{},
		want:        []metav1.OwnerReference{},
		wantChanged: true,
	}, {
		name:        "already handed over, the successor kept without the flag: unchanged",
		refs:        []metav1.OwnerReference{newRef(nil, nil)},
		want:        []metav1.OwnerReference{newRef(nil, nil)},
		wantChanged: false,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := make([]metav1.OwnerReference, len(tc.refs))
			for i := range tc.refs {
				tc.refs[i].DeepCopyInto(&in[i])
			}
			owners := tc.to
			if owners == nil {
				owners = []metav1.OwnerReference{to}
			}
			got, changed := handoff.Handover(tc.refs, from, owners...)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Handover refs (-want +got):\n%s", d)
			}
			if changed != tc.wantChanged {
				t.Errorf("Handover changed = %v, want %v", changed, tc.wantChanged)
			}
			if d := cmp.Diff(in, tc.refs); d != "" {
				t.Errorf("Handover modified its input (-before +after):\n%s", d)
			}
			again, changed := handoff.Handover(got, from, owners...)
			if d := cmp.Diff(got, again); d != "" || changed {
				t.Errorf("second Handover changed = %v (-first +second):\n%s", changed, d)
			}
		})
	}
}

func TestOwnershipFamilyOwnerReference(t *testing.T) {
	fam := handoff.Family{Resource: schema.GroupVersionResource{Group: "operator.tekton.dev", Version: "v1alpha1", Resource: "tektoninstallersets"},
		Kind: "TektonInstallerSet"}
	want := metav1.OwnerReference{APIVersion: "operator.tekton.dev/v1alpha1", Kind: "TektonInstallerSet",
		Name: "static-v2", UID: "uid-static-v2", Controller: owPtr(true), BlockOwnerDeletion: owPtr(true)}
	if d := cmp.Diff(want, fam.OwnerReference(owNew)); d != "" {
		t.Errorf("OwnerReference (-want +got):\n%s", d)
	}
}

func TestOwnershipRef(t *testing.T) {
	u := owLive(handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: prNS, Name: "controller"}, nil, nil)
	u.SetAPIVersion("apps/v1beta2")
	if got, want := handoff.RefOf(u), (handoff.Ref{Group: "apps", Kind: "Deployment", Namespace: prNS, Name: "controller"}); got != want {
		t.Errorf("RefOf = %v, want %v", got, want)
	}
	tests := map[handoff.Ref]string{
		{Group: "apps", Kind: "Deployment", Namespace: prNS, Name: "c"}: "Deployment.apps tekton-pipelines/c",
		{Kind: "ConfigMap", Namespace: prNS, Name: "c"}:                 "ConfigMap tekton-pipelines/c",
		{Kind: "Namespace", Name: prNS}:                                 "Namespace tekton-pipelines",
	}
	for r, want := range tests {
		if got := r.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", r, got, want)
		}
	}
}
