package handoff

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/types"
)

// ActionKind is what an [Action] does.
type ActionKind string

// The kinds of action a [Plan] holds, in the order they appear in it.
const (
	// ActionRelease removes the superseded mark from a set of the desired
	// generation: a rollback gives it its resources back.
	ActionRelease ActionKind = "Release"
	// ActionSupersede marks an old set as superseded by the desired
	// generation, so its controller stops writing shared resources.
	ActionSupersede ActionKind = "Supersede"
	// ActionCreate creates the set of a desired role.
	ActionCreate ActionKind = "Create"
	// ActionUpdate updates a desired set in place: its content hash differs.
	ActionUpdate ActionKind = "Update"
	// ActionWait waits for a set (or a missing role) without writing.
	ActionWait ActionKind = "Wait"
	// ActionRetire deletes exactly one set, named by name and UID.
	ActionRetire ActionKind = "Retire"
	// ActionPrune deletes what an update in place took out of a desired
	// set ([Set.Dropped]), once the set is Ready for its new spec and when
	// no other live set lists it; then it clears the record.
	ActionPrune ActionKind = "Prune"
	// ActionFinalize finishes the retirement of a set that no controller
	// finalizes (it had no finalizer when it was retired, so the executor
	// put [ExecutorFinalizer] on it): what it installed without an owner
	// is deleted, then that finalizer is removed and the set goes.
	ActionFinalize ActionKind = "Finalize"
)

// ExecutorFinalizer is the finalizer the executor puts on a set that has
// none before it retires it, so that the set stays until what it installed
// without an owner is deleted: once the set is gone, nothing would remember
// those objects. An [ActionFinalize] removes it.
const ExecutorFinalizer = "handoff.kube-handoff.io/retire"

// finalizedByExecutor reports whether a deleting set waits on the
// executor's own finalizer.
func finalizedByExecutor(s Set) bool {
	return s.Deleting && s.Object != nil && slices.Contains(s.Object.GetFinalizers(), ExecutorFinalizer)
}

// Phase is where a family stands in its handoff.
type Phase string

// The phases of a [Plan].
const (
	// PhaseInstall: no other generation exists; the desired one is being
	// created or awaited.
	PhaseInstall Phase = "Install"
	// PhaseUpgrade: an older generation serves while the desired one is
	// created or awaited. Nothing old is retired in this phase.
	PhaseUpgrade Phase = "Upgrade"
	// PhaseHandoff: every desired set is Ready; old sets are retired.
	PhaseHandoff Phase = "Handoff"
	// PhaseRemove: no generation is desired; every set is retired.
	PhaseRemove Phase = "Remove"
	// PhaseSteady: nothing to do.
	PhaseSteady Phase = "Steady"
)

// Action is one step of a [Plan], as plain data.
type Action struct {
	// Kind is what the action does.
	Kind ActionKind
	// Role and Generation say which set the action is about; for Create,
	// the set to make.
	Role       string
	Generation string
	// Set and UID name an existing set; empty for Create and for a Wait on
	// a role that has no set yet.
	Set string
	UID types.UID
	// Reason says why, for logs and for the caller's status.
	Reason string
	// Readiness is, for a Wait on a set that is not Ready, what the set's
	// probe said (State, Reason, Message), so a caller's status needs no
	// parsing of Reason; zero for every other action.
	Readiness Readiness
}

// String renders the action for a log line.
func (a Action) String() string {
	var b strings.Builder
	b.WriteString(string(a.Kind))
	if a.Set != "" {
		fmt.Fprintf(&b, " %s", a.Set)
	}
	fmt.Fprintf(&b, " (%s/%s", a.Generation, a.Role)
	if a.UID != "" {
		fmt.Fprintf(&b, ", uid %s", a.UID)
	}
	b.WriteString(")")
	if a.Reason != "" {
		b.WriteString(": " + a.Reason)
	}
	return b.String()
}

// Plan is the outcome of planning: a phase and the actions to take, in order.
type Plan struct {
	// Generation is the desired generation; empty for a removal.
	Generation string
	// Phase says where the component is in its life cycle.
	Phase Phase
	// Actions are the steps to take, in the order to take them.
	Actions []Action
}

// Of returns the plan's actions of one kind, in plan order.
func (p Plan) Of(kind ActionKind) []Action {
	var out []Action
	for _, a := range p.Actions {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

// Settled reports whether there is nothing left to do or wait for.
func (p Plan) Settled() bool { return len(p.Actions) == 0 }

// String renders the plan as a small table.
func (p Plan) String() string {
	var b strings.Builder
	gen := p.Generation
	if gen == "" {
		gen = "(none)"
	}
	fmt.Fprintf(&b, "phase %s, desired generation %s\n", p.Phase, gen)
	if len(p.Actions) == 0 {
		b.WriteString("  nothing to do\n")
		return b.String()
	}
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  ACTION\tGENERATION\tROLE\tSET\tREASON")
	for _, a := range p.Actions {
		set := a.Set
		if set == "" {
			set = "-"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", a.Kind, a.Generation, a.Role, set, a.Reason)
	}
	w.Flush()
	return b.String()
}

// Planner turns the observed sets of a family and the desired generation
// into a [Plan]. It is pure: no I/O, no clock, no randomness. The same input
// gives the same plan whatever the order of the observed sets.
type Planner struct {
	// Family is the family planned for. Observed sets whose labels do not
	// match its selector are ignored: no action ever names them.
	Family Family
	// RoleOrder orders roles for retirement when no generation is desired
	// (a removal): later roles are retired first, roles not listed before
	// all of them. With a desired generation its role order is used.
	RoleOrder []string
}

// Plan decides the next actions. It fails, planning nothing, when the
// desired generation or an observed set of the family is malformed; desired
// nil means the component is removed. Sets with [Set.Invalid] are left
// out: no action ever names them.
func (p Planner) Plan(observed []Set, desired *Desired) (Plan, error) {
	if len(p.Family.Selector) == 0 {
		return Plan{}, fmt.Errorf("%w: planner has an empty family selector", ErrInvalidFamily)
	}
	if err := validateDesired(desired); err != nil {
		return Plan{}, err
	}
	sets, err := p.members(observed)
	if err != nil {
		return Plan{}, err
	}
	var plan Plan
	if desired == nil {
		plan = p.planRemoval(sets)
	} else {
		plan = p.planHandoff(sets, desired)
	}
	// A retirement the executor must finish itself is not waited for.
	for _, s := range sets {
		if !finalizedByExecutor(s) {
			continue
		}
		plan.Actions = slices.DeleteFunc(plan.Actions, func(a Action) bool {
			return a.Kind == ActionWait && a.UID == s.UID && a.Reason == reasonFinalizing
		})
		plan.Actions = append(plan.Actions, act(ActionFinalize, s, "retired with no controller to finalize it"))
		if plan.Phase == PhaseSteady {
			plan.Phase = PhaseHandoff
		}
	}
	return plan, nil
}

// reasonFinalizing is the reason of a Wait on a set being deleted.
const reasonFinalizing = "being finalized"

// members keeps the family's sets, validated and in a canonical order.
func (p Planner) members(observed []Set) ([]Set, error) {
	sets := make([]Set, 0, len(observed))
	uids := make(map[types.UID]bool, len(observed))
	for _, s := range observed {
		if !p.Family.Contains(s.Labels) || s.Invalid != nil {
			continue // not ours, or not readable: never planned for
		}
		var err error
		switch {
		case s.Name == "":
			err = fmt.Errorf("%w: no name", ErrInvalidSet)
		case s.UID == "":
			err = fmt.Errorf("%w: no UID", ErrInvalidSet)
		case s.Generation == "":
			err = fmt.Errorf("%w: no generation", ErrInvalidSet)
		case s.Role == "":
			err = fmt.Errorf("%w: no role", ErrInvalidSet)
		case uids[s.UID]:
			err = fmt.Errorf("%w: UID %s observed twice", ErrInvalidSet, s.UID)
		}
		if err != nil {
			return nil, &SetError{Name: s.Name, Err: err}
		}
		uids[s.UID] = true
		sets = append(sets, s)
	}
	slices.SortFunc(sets, func(a, b Set) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return sets, nil
}

func validateDesired(d *Desired) error {
	if d == nil {
		return nil
	}
	if d.Generation == "" {
		return fmt.Errorf("%w: empty generation ID", ErrInvalidDesired)
	}
	if len(d.Roles) == 0 {
		return fmt.Errorf("%w: generation %q has no roles", ErrInvalidDesired, d.Generation)
	}
	idx := make(map[string]int, len(d.Roles))
	for i, r := range d.Roles {
		if r.Name == "" {
			return &RoleError{Role: r.Name, Err: fmt.Errorf("%w: role %d has no name", ErrInvalidDesired, i)}
		}
		if _, dup := idx[r.Name]; dup {
			return &RoleError{Role: r.Name, Err: fmt.Errorf("%w: role listed twice", ErrInvalidDesired)}
		}
		idx[r.Name] = i
	}
	for _, r := range d.Roles {
		for _, dep := range r.After {
			if _, ok := idx[dep]; !ok {
				return &RoleError{Role: r.Name, Err: fmt.Errorf("%w: waits for unknown role %q", ErrInvalidDesired, dep)}
			}
		}
	}
	// Depth-first search for a cycle: 1 = on the path, 2 = done.
	state := make([]int8, len(d.Roles))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return &RoleError{Role: d.Roles[i].Name, Err: fmt.Errorf("%w: dependency cycle", ErrInvalidDesired)}
		case 2:
			return nil
		}
		state[i] = 1
		for _, dep := range d.Roles[i].After {
			if err := visit(idx[dep]); err != nil {
				return err
			}
		}
		state[i] = 2
		return nil
	}
	for i := range d.Roles {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

func (p Planner) planHandoff(sets []Set, d *Desired) Plan {
	roleIdx := make(map[string]int, len(d.Roles))
	for i, r := range d.Roles {
		roleIdx[r.Name] = i
	}
	var (
		kept        = make(map[string]Set, len(d.Roles))
		duplicates  []Action
		old         []Set
		terminating []Set
	)
	for _, s := range sets {
		_, wanted := roleIdx[s.Role]
		switch {
		case s.Deleting:
			terminating = append(terminating, s)
		case s.Generation != d.Generation || !wanted:
			old = append(old, s)
		default:
			if k, ok := kept[s.Role]; ok {
				duplicates = append(duplicates, retire(s, "duplicate of "+k.Name))
				continue
			}
			kept[s.Role] = s
		}
	}

	plan := Plan{Generation: d.Generation}
	for _, r := range d.Roles {
		if s, ok := kept[r.Name]; ok && s.SupersededBy != "" {
			plan.Actions = append(plan.Actions, act(ActionRelease, s,
				fmt.Sprintf("generation %s is desired again; %s abandoned", d.Generation, s.SupersededBy)))
		}
	}
	for _, s := range old {
		if s.SupersededBy != d.Generation {
			plan.Actions = append(plan.Actions, act(ActionSupersede, s, "generation "+d.Generation+" is desired"))
		}
	}

	// ready[i]: role i has a kept set that is Ready for its current spec and
	// needs no update.
	ready := make([]bool, len(d.Roles))
	var prunes []Action
	allReady := true
	for i, r := range d.Roles {
		s, ok := kept[r.Name]
		switch {
		case ok && r.Hash != "" && s.Hash != r.Hash:
			plan.Actions = append(plan.Actions, act(ActionUpdate, s, fmt.Sprintf("content hash %q, want %q", s.Hash, r.Hash)))
		case ok && s.Readiness.State != Ready:
			wait := act(ActionWait, s, s.Readiness.String())
			wait.Readiness = s.Readiness
			plan.Actions = append(plan.Actions, wait)
		case ok:
			ready[i] = true
			if len(s.Dropped) > 0 {
				prunes = append(prunes, act(ActionPrune, s, fmt.Sprintf("%d resources dropped by an update in place", len(s.Dropped))))
			}
		default:
			plan.Actions = append(plan.Actions, p.missing(r, d, kept, ready, roleIdx, terminating))
		}
		allReady = allReady && ready[i]
	}
	plan.Actions = append(plan.Actions, duplicates...)
	plan.Actions = append(plan.Actions, prunes...)

	// Records of what an update in place of this generation dropped do
	// not make an install an upgrade.
	others := slices.ContainsFunc(old, func(s Set) bool { return !isRecord(s.Generation, s.Role, d.Generation) })
	for _, s := range terminating {
		if s.Generation != d.Generation {
			others = true
		}
	}
	switch {
	case !allReady && others:
		plan.Phase = PhaseUpgrade
	case !allReady:
		plan.Phase = PhaseInstall
	default:
		p.sortForRetirement(old, roleIdx)
		for _, s := range old {
			reason := "superseded by generation " + d.Generation + ", which is Ready"
			switch {
			case isRecord(s.Generation, s.Role, d.Generation):
				reason = fmt.Sprintf("records what an update in place of generation %s dropped, and the generation is Ready", d.Generation)
			case s.Generation == d.Generation:
				reason = fmt.Sprintf("role %s is not in generation %s", s.Role, d.Generation)
			}
			plan.Actions = append(plan.Actions, retire(s, reason))
		}
		if len(old) == 0 {
			for _, s := range terminating {
				plan.Actions = append(plan.Actions, act(ActionWait, s, reasonFinalizing))
			}
		}
		plan.Phase = PhaseHandoff
		if len(plan.Actions) == 0 {
			plan.Phase = PhaseSteady
		}
	}
	return plan
}

// missing decides what to do for a desired role that has no live set.
func (p Planner) missing(r Role, d *Desired, kept map[string]Set, ready []bool, roleIdx map[string]int, terminating []Set) Action {
	wait := Action{Kind: ActionWait, Role: r.Name, Generation: d.Generation}
	for _, t := range terminating {
		if t.Generation == d.Generation && t.Role == r.Name {
			wait.Set, wait.UID = t.Name, t.UID
			wait.Reason = "predecessor " + t.Name + " is still being deleted"
			return wait
		}
	}
	// Nor while any set of the family is being finalized (a removal, then
	// an install): its finalizer decides from a List what no live set
	// lists and deletes it, so a set created between that List and the
	// deletes would lose what it lists and its controller re-create it
	// later — a gap for what both list.
	if len(terminating) > 0 {
		t := terminating[0]
		wait.Set, wait.UID = t.Name, t.UID
		wait.Reason = "set " + t.Name + " of generation " + t.Generation + " is still being finalized"
		return wait
	}
	for _, dep := range r.After {
		if !ready[roleIdx[dep]] {
			wait.Reason = "waits for role " + dep + " to be Ready"
			if s, ok := kept[dep]; ok {
				wait.Reason += ": " + s.Readiness.String()
			}
			return wait
		}
	}
	return Action{Kind: ActionCreate, Role: r.Name, Generation: d.Generation, Reason: "missing"}
}

func (p Planner) planRemoval(sets []Set) Plan {
	var live []Set
	plan := Plan{Phase: PhaseRemove}
	for _, s := range sets {
		if s.Deleting {
			plan.Actions = append(plan.Actions, act(ActionWait, s, reasonFinalizing))
			continue
		}
		live = append(live, s)
	}
	order := make(map[string]int, len(p.RoleOrder))
	for i, r := range p.RoleOrder {
		order[r] = i
	}
	p.sortForRetirement(live, order)
	retires := make([]Action, 0, len(live))
	for _, s := range live {
		retires = append(retires, retire(s, "no generation is desired"))
	}
	plan.Actions = append(retires, plan.Actions...)
	if len(plan.Actions) == 0 {
		plan.Phase = PhaseSteady
	}
	return plan
}

// sortForRetirement puts workloads before what they depend on: roles
// missing from order first, then roles from last to first, each group by
// generation then name.
func (p Planner) sortForRetirement(sets []Set, order map[string]int) {
	rank := func(role string) int {
		if i, ok := order[role]; ok {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(sets, func(a, b Set) int {
		return cmp.Or(cmp.Compare(rank(b.Role), rank(a.Role)), cmp.Compare(a.Role, b.Role),
			cmp.Compare(a.Generation, b.Generation), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
}

func act(kind ActionKind, s Set, reason string) Action {
	return Action{Kind: kind, Role: s.Role, Generation: s.Generation, Set: s.Name, UID: s.UID, Reason: reason}
}

func retire(s Set, reason string) Action { return act(ActionRetire, s, reason) }
