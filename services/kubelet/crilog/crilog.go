// Package crilog reads container log files in the CRI format that
// containerd writes: one record per line,
//
//	<RFC 3339 nano timestamp> <stdout|stderr> <P|F> <content>
//
// where P marks a partial line (the content continues in the next record)
// and F the end of a line. Parse decodes one record; Reader turns a file
// into the lines a user sees (kubectl logs), with optional timestamps, the
// last N lines only, and following the file as it grows.
package crilog

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// ErrFormat is returned for a line that is not a CRI log record.
var ErrFormat = errors.New("crilog: malformed record")

// Record is one line of a CRI log file.
type Record struct {
	Time   time.Time
	Stream string // "stdout" or "stderr"
	// Partial is true for a "P" record: Content does not end the line.
	Partial bool
	Content []byte
}

// Parse decodes one record (without its trailing newline). Content aliases
// line.
func Parse(line []byte) (Record, error) {
	var r Record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: no timestamp", ErrFormat)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("%w: timestamp: %w", ErrFormat, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != "stdout" && string(stream) != "stderr") {
		return r, fmt.Errorf("%w: stream", ErrFormat)
	}
	tag, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// "ts stream F" with empty content and no trailing space.
		tag, content = rest, nil
	}
	switch {
	case bytes.Equal(tag, []byte("F")):
	case bytes.Equal(tag, []byte("P")):
		r.Partial = true
	default:
		// Tags may carry more, colon-separated; the first says P or F.
		if first, _, found := bytes.Cut(tag, []byte{':'}); found && (string(first) == "P" || string(first) == "F") {
			r.Partial = string(first) == "P"
			break
		}
		return r, fmt.Errorf("%w: tag %q", ErrFormat, tag)
	}
	r.Time, r.Stream, r.Content = t, string(stream), content
	return r, nil
}
