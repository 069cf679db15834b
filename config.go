package handoff

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ConfigError reports a configuration that cannot be used, with every
// field at fault: missing, out of range, or contradicting another.
// [Executor.Validate] and [Family.Validate] return it, having made no call
// to the cluster; [Executor.Step] and [Executor.Finalize] return it before
// their first read or write. It matches [ErrInvalidFamily], which is what a
// missing field of the family or the executor failed with before.
type ConfigError struct {
	// Object names what was checked, such as
	// "executor of family tektoninstallersets app=x".
	Object string
	// Problems holds one entry per field at fault, in the order of the
	// fields; never empty.
	Problems []FieldProblem
}

// FieldProblem is what is wrong with one field.
type FieldProblem struct {
	// Field is the field's path from the type checked, such as
	// "Executor.Mapper", "Executor.Family.Namespace" or
	// "Executor.Prune.Owners".
	Field string
	// Reason says what is wrong with it, and what needs it.
	Reason string
}

// String renders the problem for a log line: "field: reason".
func (p FieldProblem) String() string { return p.Field + ": " + p.Reason }

func (e *ConfigError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	return fmt.Sprintf("%s: invalid configuration: %s", e.Object, strings.Join(msgs, "; "))
}

// Unwrap returns [ErrInvalidFamily].
func (e *ConfigError) Unwrap() error { return ErrInvalidFamily }

// Fields returns the fields at fault, in order.
func (e *ConfigError) Fields() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Field
	}
	return out
}

// Validate reports, as a [*ConfigError] naming every field at fault, an
// executor that cannot run as configured. It makes no call to the
// cluster. [Executor.Step] and [Executor.Finalize] call it before
// anything else, so a misconfigured executor reads and writes nothing.
//
// It requires:
//   - a valid Family ([Family.Validate]; fields named
//     Executor.Family.…);
//   - Sets or Dynamic, to read and write sets;
//   - Objects, or Dynamic and Mapper, to reach the resources sets list.
//     A retirement, a removal and Finalize reach them; a Step that only
//     installs does not yet, but requires them all the same, so that a
//     later Step never finds them missing after the first one wrote;
//   - Prune.Owners only with Prune.AnyUnowned (see [PruneOptions.Owners]);
//   - Propagation and ResourcePropagation empty or one of Background,
//     Foreground and Orphan;
//   - StepTimeout and Concurrency not negative;
//   - Recorder and Component both set, or neither.
//
// Build is not required here: only a Step with a desired generation
// creates and updates sets, and such a Step reports a missing Build with
// the rest. A removal (Step with nil) and Finalize never build.
func (e *Executor) Validate() error { return e.validate(false) }

// validate is Validate, with Build required when build is true.
func (e *Executor) validate(build bool) error {
	var ps []FieldProblem
	add := func(field, format string, args ...any) {
		ps = append(ps, FieldProblem{Field: "Executor." + field, Reason: fmt.Sprintf(format, args...)})
	}
	for _, p := range e.Family.problems() {
		add("Family."+p.Field, "%s", p.Reason)
	}
	if e.Sets == nil && e.Dynamic == nil {
		add("Sets", "nil, and so is Dynamic: nothing reads and writes the sets")
	}
	if e.Objects == nil {
		if e.Dynamic == nil {
			add("Dynamic", "nil, and so is Objects: nothing reaches the resources sets list, which a retirement, a removal and Finalize hand over and delete")
		}
		if e.Mapper == nil {
			add("Mapper", "nil, and Objects is nil: the resources sets list are reached through Dynamic and Mapper, which a retirement, a removal and Finalize need")
		}
	}
	if build && e.Build == nil {
		add("Build", "nil, and so is the Desired's Build: a Step with a desired generation creates and updates its sets with one of them")
	}
	for _, p := range e.Prune.problems() {
		add("Prune."+p.Field, "%s", p.Reason)
	}
	policies := []metav1.DeletionPropagation{"", metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan}
	if !slices.Contains(policies, e.Propagation) {
		add("Propagation", "%q is no deletion propagation policy (Background, Foreground, Orphan)", e.Propagation)
	}
	if !slices.Contains(policies, e.ResourcePropagation) {
		add("ResourcePropagation", "%q is no deletion propagation policy (Background, Foreground, Orphan)", e.ResourcePropagation)
	}
	if e.StepTimeout < 0 {
		add("StepTimeout", "%s is negative", e.StepTimeout.Round(time.Millisecond))
	}
	switch {
	case e.Recorder != nil && e.Component == nil:
		add("Component", "nil, and Recorder is set: Events are recorded on Component, so none would be")
	case e.Recorder == nil && e.Component != nil:
		add("Recorder", "nil, and Component is set: no Event would be recorded on it")
	}
	if e.Concurrency < 0 {
		add("Concurrency", "%d is negative", e.Concurrency)
	}
	if len(ps) == 0 {
		return nil
	}
	return &ConfigError{Object: "executor of " + e.Family.describe(), Problems: ps}
}

// problems returns what is wrong with the family's fields, each named by
// its path from Family.
func (f Family) problems() []FieldProblem {
	var ps []FieldProblem
	add := func(field, format string, args ...any) {
		ps = append(ps, FieldProblem{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if f.Resource.Resource == "" {
		add("Resource", "no set resource")
	}
	if len(f.Selector) == 0 {
		add("Selector", "empty: it would select every set of the kind")
	}
	sel := make([]string, 0, len(f.Selector))
	for k := range f.Selector {
		sel = append(sel, k)
	}
	slices.Sort(sel) // the same error every time
	for _, k := range sel {
		if err := validLabel(k, f.Selector[k]); err != nil {
			add("Selector", "label %s: %v: the API server would refuse the List", k, err)
		}
	}
	if f.GenerationLabel == "" {
		add("GenerationLabel", "empty: no set's generation could be read")
	}
	named := []struct{ field, key string }{
		{"GenerationLabel", f.GenerationLabel}, {"RoleLabel", f.RoleLabel},
		{"HashAnnotation", f.HashAnnotation}, {"SupersededAnnotation", f.SupersededAnnotation},
	}
	for _, k := range named {
		if msgs := validation.IsQualifiedName(strings.ToLower(k.key)); k.key != "" && len(msgs) > 0 {
			add(k.field, "%q: %s", k.key, strings.Join(msgs, "; "))
		}
	}
	keys := make([]string, 0, len(f.KindSelector))
	for k := range f.KindSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := f.Selector[k]; !ok || v != f.KindSelector[k] {
			// The List of every set of the kind would miss the family's own.
			add("KindSelector", "label %s=%s is not in the family selector %v", k, f.KindSelector[k], f.Selector)
			break
		}
	}
	switch {
	case f.Namespaced && f.Namespace == "":
		add("Namespace", "empty, and the set kind is namespaced (Namespaced): the sets would be addressed without a namespace")
	case f.Namespaced:
		if msgs := validation.IsDNS1123Label(f.Namespace); len(msgs) > 0 {
			add("Namespace", "%q: %s", f.Namespace, strings.Join(msgs, "; "))
		}
	case f.Namespace != "":
		add("Namespaced", "false, and Namespace is %q: a namespaced set kind says so", f.Namespace)
	}
	return ps
}

// describe names the family for an error: its set resource, namespace
// and selector.
func (f Family) describe() string {
	s := "family " + f.Resource.Resource
	if f.Resource.Resource == "" {
		s = "family (no set resource)"
	}
	if f.Namespace != "" {
		s += " in " + f.Namespace
	}
	if len(f.Selector) > 0 {
		s += " " + f.LabelSelector().String()
	}
	return s
}

// problems returns what is wrong with the options' fields, each named by
// its path from PruneOptions.
func (o PruneOptions) problems() []FieldProblem {
	if len(o.Owners) > 0 && !o.AnyUnowned {
		return []FieldProblem{{Field: "Owners", Reason: "set without AnyUnowned: an object only Owners own would be deleted only if its kind is in Unowned, and the rest of what the family installed under them left behind; set AnyUnowned too, and keep what must stay with Protected or the keep annotation"}}
	}
	return nil
}
