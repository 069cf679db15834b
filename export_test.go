package handoff

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// The pure decisions behind Finalize and the retirement's handover, under
// the names the tests of package handoff_test use. Adopters reach them
// through Executor.Finalize and Executor.Step, whose results carry the
// same data (FinalizeResult, Result); tests check them one by one.
var (
	Finalization  = finalization
	Finalizations = finalizations
	LiveVerdict   = liveVerdict
	Handover      = handOver
)

type Owner = ownership

const (
	OwnedBySet    = ownedBySet
	OwnedByFamily = ownedByFamily
	OwnedByOther  = ownedByOther
	Unowned       = notOwned
)

func OwnerOf(obj *unstructured.Unstructured, set Set, family []Set) Owner {
	return ownerOf(obj.GetOwnerReferences(), set, family)
}
