package events

import "errors"

// Sentinel errors of the log. Check them with errors.Is.
var (
	// ErrBadRevision is returned for a resourceVersion that is not a
	// non-negative integer.
	ErrBadRevision = errors.New("events: bad revision")
	// ErrRevisionGap means the log skipped a revision it should hold.
	ErrRevisionGap = errors.New("events: revision gap")
	// ErrTooOld means the requested revision is older than the log keeps.
	ErrTooOld = errors.New("events: revision too old")
)
