package handoff

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the library returns about a particular object
// wraps one of these, so callers can test with [errors.Is].
var (
	// ErrInvalidSet means an observed set cannot be classified: it lacks its
	// generation or role, or its resource list cannot be read.
	ErrInvalidSet = errors.New("invalid set")
	// ErrInvalidDesired means the desired generation is malformed: an empty
	// generation ID, a duplicate or empty role name, a dependency on an
	// unknown role, or a dependency cycle.
	ErrInvalidDesired = errors.New("invalid desired generation")
	// ErrNameTaken means a set's deterministic name is held by an object that
	// is not the set the executor meant to create.
	ErrNameTaken = errors.New("set name is taken")
	// ErrInvalidFamily means a [Family], or an [Executor] configured with
	// one, lacks a field the operation needs or has fields that contradict
	// each other; a [*ConfigError], which matches it, names every such
	// field.
	ErrInvalidFamily = errors.New("invalid family")
	// ErrDiscoveryFailed means the discovery of an API group failed, so
	// whether a kind of it is served is unknown: nothing listed in such a
	// kind is deleted or reported gone (see [DiscoveryError]).
	ErrDiscoveryFailed = errors.New("API discovery failed")
)

// DiscoveryError reports an API group whose discovery failed (an
// aggregated API that is down). Its kinds are unknown, never "not served".
type DiscoveryError struct {
	// Group is the API group.
	Group string
	// Err is what discovery returned.
	Err error
}

func (e *DiscoveryError) Error() string {
	return fmt.Sprintf("API group %q: %v: %v", e.Group, ErrDiscoveryFailed, e.Err)
}

// Unwrap returns [ErrDiscoveryFailed] and the discovery error.
func (e *DiscoveryError) Unwrap() []error { return []error{ErrDiscoveryFailed, e.Err} }

// SetError reports a problem with one set, named by its name.
type SetError struct {
	// Name of the set.
	Name string
	// Err is what is wrong; errors.Is sees through to it.
	Err error
}

func (e *SetError) Error() string { return fmt.Sprintf("set %q: %v", e.Name, e.Err) }

// Unwrap returns the underlying error.
func (e *SetError) Unwrap() error { return e.Err }

// RoleError reports a problem with one role of the desired generation.
type RoleError struct {
	// Role is the role's name.
	Role string
	// Err is what is wrong; errors.Is sees through to it.
	Err error
}

func (e *RoleError) Error() string { return fmt.Sprintf("role %q: %v", e.Role, e.Err) }

// Unwrap returns the underlying error.
func (e *RoleError) Unwrap() error { return e.Err }

// ResourceError reports a problem with one resource a set lists.
type ResourceError struct {
	// Ref identifies the resource.
	Ref Ref
	// Err is what is wrong; errors.Is sees through to it.
	Err error
}

func (e *ResourceError) Error() string { return fmt.Sprintf("%s: %v", e.Ref, e.Err) }

// Unwrap returns the underlying error.
func (e *ResourceError) Unwrap() error { return e.Err }
