package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crd is one decoded CustomResourceDefinition with what Start needs to
// check that it is served.
type crd struct {
	obj      *unstructured.Unstructured
	group    string
	plural   string
	versions []string // served versions
}

// decodeCRDs parses manifests (YAML or JSON, possibly several YAML
// documents each) into CRDs and checks the fields Start relies on.
func decodeCRDs(manifests [][]byte) ([]crd, error) {
	var out []crd
	for i, m := range manifests {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(m), 4096)
		for doc := 0; ; doc++ {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("CRDs[%d] document %d: %w", i, doc, err)
			}
			if len(obj) == 0 {
				continue // empty document
			}
			c, err := newCRD(&unstructured.Unstructured{Object: obj})
			if err != nil {
				return nil, fmt.Errorf("CRDs[%d] document %d: %w", i, doc, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func newCRD(u *unstructured.Unstructured) (crd, error) {
	if u.GetAPIVersion() != "apiextensions.k8s.io/v1" || u.GetKind() != "CustomResourceDefinition" {
		return crd{}, fmt.Errorf("want apiextensions.k8s.io/v1 CustomResourceDefinition, got %s %s", u.GetAPIVersion(), u.GetKind())
	}
	c := crd{obj: u}
	c.group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	c.plural, _, _ = unstructured.NestedString(u.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(vm, "name")
		served, _, _ := unstructured.NestedBool(vm, "served")
		if name != "" && served {
			c.versions = append(c.versions, name)
		}
	}
	if c.group == "" || c.plural == "" || len(c.versions) == 0 || u.GetName() == "" {
		return crd{}, fmt.Errorf("CRD %q: needs metadata.name, spec.group, spec.names.plural and a served version", u.GetName())
	}
	return c, nil
}

// createSettle is how long the API server delays a create of a custom
// resource whose CRD became Established less than that long ago (by the
// condition's lastTransitionTime, which has one-second resolution): it
// sleeps 2 s in the request, see the "create" case of the apiextensions
// customresource_handler.go.
const createSettle = 2 * time.Second

// installCRDs creates the CRDs and waits until each is Established, every
// served version can be listed and the resource is in the API server's
// aggregated discovery, which is what the garbage collector reads. It
// returns the time after which creating instances is no longer delayed by
// the API server (see createSettle).
func (cp *ControlPlane) installCRDs(ctx context.Context, apiserver *process, crds []crd) (time.Time, error) {
	var settled time.Time
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		return settled, fmt.Errorf("controlplane: dynamic client: %w", err)
	}
	for _, c := range crds {
		if _, err := dyn.Resource(crdResource).Create(ctx, c.obj, metav1.CreateOptions{}); err != nil {
			return settled, fmt.Errorf("controlplane: creating CRD %s: %w", c.obj.GetName(), err)
		}
	}
	for _, c := range crds {
		name := c.obj.GetName()
		if err := waitFor(ctx, apiserver, "CRD "+name+" Established", func(ctx context.Context) error {
			got, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conds {
				cm, _ := cond.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					ltt, _ := cm["lastTransitionTime"].(string)
					at, err := time.Parse(time.RFC3339, ltt)
					if err != nil {
						at = time.Now() // be conservative
					}
					if t := at.Add(createSettle); t.After(settled) {
						settled = t
					}
					return nil
				}
			}
			return fmt.Errorf("not Established; conditions: %v", conds)
		}); err != nil {
			return settled, err
		}
		for _, v := range c.versions {
			gvr := schema.GroupVersionResource{Group: c.group, Version: v, Resource: c.plural}
			if err := waitFor(ctx, apiserver, "list "+gvr.String(), func(ctx context.Context) error {
				_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
				return err
			}); err != nil {
				return settled, err
			}
		}
	}
	httpClient, err := rest.HTTPClientFor(cp.Config())
	if err != nil {
		return settled, fmt.Errorf("controlplane: http client: %w", err)
	}
	return settled, waitFor(ctx, apiserver, "CRDs in discovery", func(ctx context.Context) error {
		groups, err := aggregatedDiscovery(ctx, httpClient, cp.apiURL)
		if err != nil {
			return err
		}
		for _, c := range crds {
			if !groups.serves(c) {
				return fmt.Errorf("%s.%s not in discovery yet", c.plural, c.group)
			}
		}
		return nil
	})
}

// discoveryList is the part of an apidiscovery.k8s.io/v2
// APIGroupDiscoveryList that Start reads (k8s.io/api is not a dependency).
type discoveryList struct {
	Kind  string `json:"kind"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Versions []struct {
			Version   string `json:"version"`
			Freshness string `json:"freshness"`
			Resources []struct {
				Resource string `json:"resource"`
			} `json:"resources"`
		} `json:"versions"`
	} `json:"items"`
}

func (l *discoveryList) serves(c crd) bool {
	for _, g := range l.Items {
		if g.Metadata.Name != c.group {
			continue
		}
		for _, v := range g.Versions {
			if !slices.Contains(c.versions, v.Version) || v.Freshness == "Stale" {
				continue
			}
			for _, r := range v.Resources {
				if r.Resource == c.plural {
					return true
				}
			}
		}
	}
	return false
}

// aggregatedDiscovery fetches /apis as an aggregated discovery document,
// the form the garbage collector's discovery client reads.
func aggregatedDiscovery(ctx context.Context, client *http.Client, host string) (*discoveryList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/apis", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /apis: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	var list discoveryList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("GET /apis: %w", err)
	}
	if list.Kind != "APIGroupDiscoveryList" {
		return nil, fmt.Errorf("GET /apis: got kind %q, not an aggregated discovery document", list.Kind)
	}
	return &list, nil
}
