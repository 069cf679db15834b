package handoffctrl

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// NewMapper returns a REST mapper for [handoff.Executor.Mapper] that the
// executor can reset: client-go's DeferredDiscoveryRESTMapper over a
// memory-cached discovery client for cfg. It discovers on first use and
// keeps what it found until the executor resets it, which the executor
// does once per call on a kind it does not know.
//
// Give the executor this mapper, not the manager's: controller-runtime's
// (mgr.GetRESTMapper(), v0.17) refreshes a group by itself on a miss but
// is no [meta.ResettableRESTMapper], so the executor cannot tell a kind
// that is not served from one its mapper has not seen, and stops with
// [handoff.ErrStaleMapper] at every Step once a set lists a kind the
// cluster no longer serves (a CRD deleted, an API version removed by an
// upgrade), which wedges the upgrade or the removal for good. With this
// mapper the executor resets it, discovers afresh and, when the kind is
// still unknown, counts its objects as gone ([handoff.Result].Unserved).
// The manager keeps its own mapper for its client and informers.
//
// A group whose discovery fails is left out of what the mapper knows, as
// client-go's mapper does; set [handoff.Executor.Discovery] as well (a
// discovery client for cfg) for the executor to refuse to count such a
// group's kinds as not served.
func NewMapper(cfg *rest.Config) (meta.ResettableRESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("REST mapper for %s: %w", cfg.Host, err)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}
