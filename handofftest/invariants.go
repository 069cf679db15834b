package handofftest

import (
	"errors"
	"fmt"
	"time"

	"github.com/kube-handoff/handoff"
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
// desired nil the family is empty.
func CheckConverged(c *Cluster, fam handoff.Family, desired *handoff.Desired) error {
	sets, err := familySets(c, fam)
	if err != nil {
		return err
	}
	var errs []error
	count := map[string]int{}
	for _, s := range sets {
		switch {
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

func familySets(c *Cluster, fam handoff.Family) ([]handoff.Set, error) {
	var sets []handoff.Set
	for _, o := range c.Objects() {
		if o.GroupVersionKind().Group != fam.Resource.Group || o.GetKind() != fam.Kind || !fam.Contains(o.GetLabels()) {
			continue
		}
		s, err := fam.Observe(o)
		if err != nil {
			return nil, err
		}
		sets = append(sets, s)
	}
	return sets, nil
}

// Gate checks I5 (gating) across the rounds of an upgrade: call Observe
// (on a [Cluster]) or Check (with sets listed from any cluster) after every
// round; it fails when a set outside the desired generation began deleting
// (or vanished) in a round that started while some desired set was not
// Ready for its current spec.
type Gate struct {
	wasReady bool
	live     map[string]bool // old sets not deleting at the last observation
}

// Observe records the state of the cluster's family after a round and
// checks the round.
func (g *Gate) Observe(c *Cluster, fam handoff.Family, desired handoff.Desired) error {
	sets, err := familySets(c, fam)
	if err != nil {
		return err
	}
	return g.Check(sets, desired)
}

// Check records the family's sets as observed after a round and checks the
// round.
func (g *Gate) Check(sets []handoff.Set, desired handoff.Desired) error {
	ready := map[string]bool{}
	live := map[string]bool{}
	roles := map[string]bool{}
	for _, r := range desired.Roles {
		roles[r.Name] = true
	}
	for _, s := range sets {
		mine := s.Generation == desired.Generation && roles[s.Role]
		if mine && !s.Deleting && s.Readiness.State == handoff.Ready {
			ready[s.Role] = true
		}
		if !mine && !s.Deleting {
			live[s.Name] = true
		}
	}
	var errs []error
	if !g.wasReady {
		for name := range g.live {
			if !live[name] {
				errs = append(errs, fmt.Errorf("I5: old set %s retired while the desired generation %s was not Ready", name, desired.Generation))
			}
		}
	}
	g.wasReady = len(ready) == len(desired.Roles)
	g.live = live
	return errors.Join(errs...)
}
