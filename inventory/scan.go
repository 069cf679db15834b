package inventory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kube-handoff/handoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
)

// scanPage is how many objects a List of a scan asks for at a time.
const scanPage = 500

// ErrIncomplete means a scan left out what it could not look at; the
// objects it returned are what it found elsewhere.
var ErrIncomplete = errors.New("inventory: the scan is incomplete")

// UnlistedError reports a kind a scan could not list in a namespace, and
// why: the API server's answer, such as Forbidden.
type UnlistedError struct {
	// Resource is the kind's resource.
	Resource schema.GroupResource
	// Namespace is the namespace of the List.
	Namespace string
	// Err is the List's error; errors.Is sees through to it.
	Err error
}

func (e *UnlistedError) Error() string {
	return fmt.Sprintf("list %s in %s: %v", e.Resource, e.Namespace, e.Err)
}

// Unwrap returns the List's error.
func (e *UnlistedError) Unwrap() error { return e.Err }

// Controlled finds what an operator installed before it recorded
// inventories, from the only proof the cluster itself holds: a controller
// reference. It lists, by metadata alone, every namespaced kind the API
// server serves and can list, in namespace, and returns the objects whose
// controller is the object of uid — whatever release installed them, so
// kinds the operator's current release no longer has are found too. Each
// is returned with its apiVersion (the kind's preferred version), kind,
// namespace, name, labels, annotations and owner references, ready for
// [Inventory.Generation], in the order of their [handoff.Ref]s.
//
// An operator gives its component object as the controller of what it
// applies in the component's namespace (knative/operator does, for
// namespaced objects only), so the result is what the operator installed
// there; a cluster-scoped object carries no such proof, and only a manifest
// of the installed release can say it was installed. Labels are no proof:
// anyone may set them.
//
// What the scan cannot look at is left out, never guessed: a group whose
// discovery fails (an aggregated API that is down) and a kind the caller
// may not list (an operator's RBAC grants list on the kinds it manages,
// not on every kind). The objects found are then returned with an error
// that is [ErrIncomplete] and joins a [*handoff.DiscoveryError] per such
// group and an [*UnlistedError] per such kind, so that the caller can
// record what it found and report what it could not look at. Any other
// error is returned alone, with no objects.
func Controlled(ctx context.Context, disco discovery.DiscoveryInterface, md metadata.Interface, namespace string, uid types.UID) ([]unstructured.Unstructured, error) {
	if namespace == "" || uid == "" {
		return nil, fmt.Errorf("inventory: Controlled needs a namespace and an owner's UID, got %q and %q", namespace, uid)
	}
	lists, derr := disco.ServerPreferredNamespacedResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	var skipped []error
	switch {
	case errors.As(derr, &failed):
		for gv, err := range failed.Groups {
			skipped = append(skipped, &handoff.DiscoveryError{Group: gv.Group, Err: err})
		}
	case derr != nil:
		return nil, fmt.Errorf("inventory: discovery of the namespaced kinds: %w", derr)
	}
	var out []unstructured.Unstructured
	for _, l := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list"}}, lists) {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, fmt.Errorf("inventory: discovery gave group version %q: %w", l.GroupVersion, err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource
			}
			gvk := gv.WithKind(r.Kind)
			client := md.Resource(gv.WithResource(r.Name)).Namespace(namespace)
			opts := metav1.ListOptions{Limit: scanPage}
		pages:
			for {
				page, err := client.List(ctx, opts)
				switch {
				case apierrors.IsNotFound(err):
					break pages // the kind went away after discovery: nothing of it is left
				case apierrors.IsForbidden(err) && opts.Continue == "":
					skipped = append(skipped, &UnlistedError{Resource: schema.GroupResource{Group: gv.Group, Resource: r.Name}, Namespace: namespace, Err: err})
					break pages
				case err != nil:
					return nil, fmt.Errorf("inventory: list %s in %s: %w", schema.GroupResource{Group: gv.Group, Resource: r.Name}, namespace, err)
				}
				for i := range page.Items {
					if c := metav1.GetControllerOfNoCopy(&page.Items[i]); c != nil && c.UID == uid {
						out = append(out, fromMetadata(gvk, &page.Items[i]))
					}
				}
				if opts.Continue = page.Continue; opts.Continue == "" {
					break
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return handoff.RefOf(&out[i]).String() < handoff.RefOf(&out[j]).String()
	})
	if len(skipped) > 0 {
		sort.Slice(skipped, func(i, j int) bool { return skipped[i].Error() < skipped[j].Error() })
		return out, fmt.Errorf("%w: %w", ErrIncomplete, errors.Join(skipped...))
	}
	return out, nil
}

// fromMetadata makes an object of kind gvk out of what a metadata List
// gave of it.
func fromMetadata(gvk schema.GroupVersionKind, p *metav1.PartialObjectMetadata) unstructured.Unstructured {
	var u unstructured.Unstructured
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(p.Namespace)
	u.SetName(p.Name)
	u.SetUID(p.UID)
	u.SetLabels(p.Labels)
	u.SetAnnotations(p.Annotations)
	u.SetOwnerReferences(p.OwnerReferences)
	return u
}
