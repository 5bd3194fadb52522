package framework

import (
	"errors"
	"strings"
)

// Code is the outcome of a plugin call.
type Code int

// Codes, as the Kubernetes scheduling framework names them.
const (
	// Success: the pod may go on (a nil *Status is Success too).
	Success Code = iota
	// Error: an internal error; the scheduling attempt fails and is retried.
	Error
	// Unschedulable: the pod does not fit the node now; preemption may help.
	Unschedulable
	// UnschedulableAndUnresolvable: the pod does not fit the node and
	// removing pods from it cannot help, so preemption skips the node.
	UnschedulableAndUnresolvable
	// Skip (PreFilter, PreScore only): the plugin has nothing to check for
	// this pod; its Filter or Score is not called in this cycle.
	Skip
)

var codeNames = []string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Skip"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Unknown"
}

// Status is the result of a plugin call: a code, the reasons shown to users
// (the exact Kubernetes wording, e.g. "Insufficient cpu") and the plugin that
// returned it. A nil *Status means Success.
type Status struct {
	code    Code
	reasons []string
	plugin  string
	err     error
}

// NewStatus returns a status with a code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an internal error.
func AsStatus(err error) *Status {
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code is the status code; Success for nil.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip reports whether the plugin skips the pod.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether the pod does not fit (either Unschedulable code).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons are the user-facing reasons.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// Plugin is the name of the plugin that returned s.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin sets the plugin name and returns s. A status that already
// names the plugin is not written to, so a plugin may return one shared,
// pre-tagged status (NewStatus(...).WithPlugin(name)) from concurrent
// Filter calls instead of allocating one per rejected node.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil && s.plugin != name {
		s.plugin = name
	}
	return s
}

// AsError is the status as an error: nil unless the code is Error or a
// rejection.
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsSkip() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}
