package main

import (
	"fmt"
	"os"

	"github.com/kube-handoff/handoff/handofftest"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // auth-provider plugins (oidc), as kubectl has them
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// target says which cluster the live run uses, as kubectl's flags do.
type target struct {
	// Kubeconfig is a kubeconfig file that replaces the loading rules
	// (-kubeconfig); empty means $KUBECONFIG (a list of files, merged),
	// else ~/.kube/config, else the in-cluster config of a pod.
	Kubeconfig string
	// Context is the kubeconfig context to use (-context); empty means the
	// current context.
	Context string
}

// client is what the live run talks to its cluster with.
type client struct {
	config *rest.Config
	// source names where config came from, for the run's first line: the
	// kubeconfig context, or "in-cluster config".
	source  string
	dynamic dynamic.Interface
	// mapper reads the API server's discovery once and keeps it in memory
	// until Reset; the executor resets it on a kind it does not know, and
	// so does mapping.
	mapper meta.ResettableRESTMapper
}

// connect loads the client configuration with client-go's standard
// loading rules (as kubectl does, without prompting) and builds the
// dynamic client and the discovery-backed REST mapper. It makes no call to
// the API server.
func connect(t target) (*client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = t.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.Context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("client configuration: %w", err)
	}
	source := "in-cluster config"
	if raw, err := loader.RawConfig(); err == nil && len(raw.Contexts) > 0 {
		source = "context " + raw.CurrentContext
		if t.Context != "" {
			source = "context " + t.Context
		}
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.WarningHandler = rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &client{
		config:  cfg,
		source:  source,
		dynamic: dyn,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
	}, nil
}

// resource is dyn's interface to the resource of k's kind, in k's
// namespace when the kind is namespaced.
func resource(dyn dynamic.Interface, mapper meta.RESTMapper, k handofftest.Key) (dynamic.ResourceInterface, error) {
	m, err := mapping(mapper, schema.GroupKind{Group: k.Group, Kind: k.Kind})
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(m.Resource).Namespace(k.Namespace), nil
	}
	return dyn.Resource(m.Resource), nil
}

// mapping maps a kind to its REST resource and scope; a
// [meta.ResettableRESTMapper] that does not know the kind is reset once
// and asked again, as the library's executor does.
func mapping(m meta.RESTMapper, gk schema.GroupKind) (*meta.RESTMapping, error) {
	rm, err := m.RESTMapping(gk)
	if r, ok := m.(meta.ResettableRESTMapper); ok && meta.IsNoMatchError(err) {
		r.Reset()
		rm, err = m.RESTMapping(gk)
	}
	return rm, err
}
