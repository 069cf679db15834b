package handofftest

import (
	"errors"
	"fmt"
	"time"

	"github.com/kube-handoff/handoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Gap is a time during which a resource that had to stay was absent.
type Gap struct {
	// Key is the resource that was absent.
	Key Key
	// From and To bound the absence in the cluster's fake time.
	From, To time.Time
}

// String renders the gap for a test log.
func (g Gap) String() string {
	return fmt.Sprintf("%s absent from %s to %s (%s)", g.Key, g.From.Format(time.TimeOnly), g.To.Format(time.TimeOnly), g.To.Sub(g.From))
}

// Gaps checks I1 (availability): it returns every stretch of [from, to]
// during which one of keys did not exist.
func (c *Cluster) Gaps(keys []Key, from, to time.Time) []Gap {
	var gaps []Gap
	for _, k := range keys {
		at := from
		for _, iv := range c.Timeline(k) {
			end := iv.To
			if end.IsZero() {
				end = to
			}
			if !end.After(at) {
				continue
			}
			if iv.From.After(at) {
				gaps = append(gaps, Gap{Key: k, From: at, To: minTime(iv.From, to)})
			}
			at = end
			if !at.Before(to) {
				break
			}
		}
		if at.Before(to) {
			gaps = append(gaps, Gap{Key: k, From: at, To: to})
		}
	}
	return gaps
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// CheckConverged checks I2 and I3: the family holds exactly one set per
// role of desired, each Ready and none deleting, and nothing else; with
// desired nil the family is empty. A set that cannot be read whole
// ([handoff.Set.Invalid]) is reported with its error, which wraps
// [handoff.ErrInvalidSet]: the library never retires such a set, so a
// family that holds one has not converged.
//
// A set is Ready as the executor judges it: for a family whose probe is
// a [handoff.ObjectProbe], such as package inventory's (the rollout of
// what an inventory lists), from the objects the set lists, read from
// the cluster; otherwise from the set object. So the records of what an
// update in place dropped ([handoff.Family.DroppedSets]) count as sets
// of a role desired does not have, until they retire.
func CheckConverged(c *Cluster, fam handoff.Family, desired *handoff.Desired) error {
	return CheckSets(familySets(c, fam), desired)
}

// CheckSets is [CheckConverged] over sets listed by the caller, such as a
// List from a real cluster observed with [handoff.Family.ObserveAll]. For a
// family whose probe is a [handoff.ObjectProbe], ObserveAll asks the probe
// about the set object alone (handoff.RolloutProbe then says NotReady):
// give each set the readiness the probe's ReadyFrom gives from the objects
// it lists, as CheckConverged does.
func CheckSets(sets []handoff.Set, desired *handoff.Desired) error {
	var errs []error
	count := map[string]int{}
	for _, s := range sets {
		switch {
		case s.Invalid != nil:
			errs = append(errs, fmt.Errorf("I3: %w", s.Invalid))
			continue
		case desired == nil:
			errs = append(errs, fmt.Errorf("I3: %s remains after removal", s))
		case s.Generation != desired.Generation:
			errs = append(errs, fmt.Errorf("I3: %s of an old generation remains", s))
		case s.Deleting:
			errs = append(errs, fmt.Errorf("I3: %s is still being deleted", s))
		case s.Readiness.State != handoff.Ready:
			errs = append(errs, fmt.Errorf("I3: %s is %s", s, s.Readiness))
		}
		count[s.Role]++
	}
	if desired != nil {
		for _, r := range desired.Roles {
			if count[r.Name] != 1 {
				errs = append(errs, fmt.Errorf("I2: %d sets of %s/%s, want 1", count[r.Name], desired.Generation, r.Name))
			}
			delete(count, r.Name)
		}
		for role, n := range count {
			errs = append(errs, fmt.Errorf("I3: %d sets of role %s, which %s does not have", n, role, desired.Generation))
		}
	}
	return errors.Join(errs...)
}

// familySets reads every set of the family stored in the cluster, those
// that cannot be read whole included (with Set.Invalid). Where the
// family's probe is a [handoff.ObjectProbe] (an inventory's
// handoff.RolloutProbe), each live set that is not superseded gets the
// readiness the probe gives from the objects it lists, read from the
// cluster, as the executor's Step gives it.
func familySets(c *Cluster, fam handoff.Family) []handoff.Set {
	var sets []handoff.Set
	for _, o := range c.Objects() {
		if o.GroupVersionKind().Group != fam.Resource.Group || o.GetKind() != fam.Kind || !fam.Contains(o.GetLabels()) {
			continue
		}
		s, _ := fam.Observe(o)
		sets = append(sets, s)
	}
	probe, ok := fam.Probe.(handoff.ObjectProbe)
	if !ok {
		return sets
	}
	for i := range sets {
		if s := &sets[i]; s.Invalid == nil && !s.Deleting && s.SupersededBy == "" {
			s.Readiness = probe.ReadyFrom(*s, c.live)
		}
	}
	return sets
}

// live reads the object ref names from storage, or a NotFound error, for
// an ObjectProbe.
func (c *Cluster) live(ref handoff.Ref) (*unstructured.Unstructured, error) {
	o, ok := c.Get(Key{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name})
	if !ok {
		gr := schema.GroupResource{Group: ref.Group, Resource: ref.Kind}
		c.mu.Lock()
		if k, ok := c.byGK[ref.GroupKind()]; ok {
			gr = k.gvr.GroupResource()
		}
		c.mu.Unlock()
		return nil, apierrors.NewNotFound(gr, ref.Name)
	}
	return o, nil
}

// Gate checks I5 (gating) across the rounds of an upgrade: no set outside
// the desired generation begins deleting (or vanishes) in a round that
// started while some desired set was not Ready for its current spec.
//
// Call Observe (on a [Cluster]) or Check (with sets listed from any
// cluster) once before the first round and again after every round. Each
// call checks the round since the one before, so the call before the first
// round, which only records the state, is what lets the first round be
// checked too; [World.Converge] makes it. The zero Gate is ready to use.
//
// Sets that cannot be read whole ([handoff.Set.Invalid]) never count as
// Ready, and are watched as old sets: the library never retires them.
type Gate struct {
	started  bool
	wasReady bool
	live     map[string]bool // old sets not deleting at the last observation
}

// Observe records the state of the cluster's family, before the first
// round or after a round, and checks the round. Sets are Ready as
// [CheckConverged] judges them.
func (g *Gate) Observe(c *Cluster, fam handoff.Family, desired handoff.Desired) error {
	return g.Check(familySets(c, fam), desired)
}

// Check records the family's sets as observed before the first round or
// after a round, and checks the round.
func (g *Gate) Check(sets []handoff.Set, desired handoff.Desired) error {
	ready := map[string]bool{}
	live := map[string]bool{}
	roles := map[string]bool{}
	for _, r := range desired.Roles {
		roles[r.Name] = true
	}
	for _, s := range sets {
		mine := s.Invalid == nil && s.Generation == desired.Generation && roles[s.Role]
		if mine && !s.Deleting && s.Readiness.State == handoff.Ready {
			ready[s.Role] = true
		}
		if !mine && !s.Deleting {
			live[s.Name] = true
		}
	}
	var errs []error
	if g.started && !g.wasReady {
		for name := range g.live {
			if !live[name] {
				errs = append(errs, fmt.Errorf("I5: old set %s retired while the desired generation %s was not Ready", name, desired.Generation))
			}
		}
	}
	g.started = true
	g.wasReady = len(ready) == len(desired.Roles)
	g.live = live
	return errors.Join(errs...)
}
