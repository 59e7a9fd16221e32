package cloudprovider

import (
	"errors"
	"fmt"
)

// InsufficientCapacityError: no offering the NodeClaim allows can be launched
// now. The controllers delete the NodeClaim, remember the offerings as
// unavailable for a while, and provision again.
type InsufficientCapacityError struct {
	// Offerings that were refused, as instance type, zone and capacity type,
	// so the caller can avoid them.
	Offerings []Offering
	err       error
}

// Offering names one way to buy an instance type.
type Offering struct {
	InstanceType, Zone, CapacityType string
}

func (e *InsufficientCapacityError) Error() string { return "insufficient capacity: " + e.err.Error() }
func (e *InsufficientCapacityError) Unwrap() error { return e.err }

// NewInsufficientCapacityError wraps err, recording the refused offerings.
func NewInsufficientCapacityError(err error, refused ...Offering) error {
	return &InsufficientCapacityError{Offerings: refused, err: err}
}

// IsInsufficientCapacityError reports whether err is (or wraps) one.
func IsInsufficientCapacityError(err error) bool {
	var e *InsufficientCapacityError
	return errors.As(err, &e)
}

// RefusedOfferings returns the offerings an InsufficientCapacityError names.
func RefusedOfferings(err error) []Offering {
	var e *InsufficientCapacityError
	if errors.As(err, &e) {
		return e.Offerings
	}
	return nil
}

// NodeClaimNotFoundError: the instance does not exist (any more).
type NodeClaimNotFoundError struct{ err error }

func (e *NodeClaimNotFoundError) Error() string { return "nodeclaim not found: " + e.err.Error() }
func (e *NodeClaimNotFoundError) Unwrap() error { return e.err }

// NewNodeClaimNotFoundError wraps err.
func NewNodeClaimNotFoundError(err error) error { return &NodeClaimNotFoundError{err: err} }

// IsNodeClaimNotFoundError reports whether err is (or wraps) one.
func IsNodeClaimNotFoundError(err error) bool {
	var e *NodeClaimNotFoundError
	return errors.As(err, &e)
}

// IgnoreNodeClaimNotFoundError returns nil for a NodeClaimNotFoundError and
// err otherwise.
func IgnoreNodeClaimNotFoundError(err error) error {
	if IsNodeClaimNotFoundError(err) {
		return nil
	}
	return err
}

// NodeClassNotReadyError: the NodeClass cannot be launched from yet.
type NodeClassNotReadyError struct{ err error }

func (e *NodeClassNotReadyError) Error() string { return "nodeclass not ready: " + e.err.Error() }
func (e *NodeClassNotReadyError) Unwrap() error { return e.err }

// NewNodeClassNotReadyError wraps err.
func NewNodeClassNotReadyError(err error) error { return &NodeClassNotReadyError{err: err} }

// IsNodeClassNotReadyError reports whether err is (or wraps) one.
func IsNodeClassNotReadyError(err error) bool {
	var e *NodeClassNotReadyError
	return errors.As(err, &e)
}

// ErrorKind names the typed error err is, "" for any other, as the `error`
// label of the cloudprovider metrics.
func ErrorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case IsNodeClaimNotFoundError(err):
		return "NodeClaimNotFoundError"
	case IsInsufficientCapacityError(err):
		return "InsufficientCapacityError"
	case IsNodeClassNotReadyError(err):
		return "NodeClassNotReadyError"
	}
	return ""
}

// String renders an offering for messages.
func (o Offering) String() string {
	return fmt.Sprintf("%s/%s/%s", o.InstanceType, o.Zone, o.CapacityType)
}
