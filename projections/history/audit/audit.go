package audit

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/projections/history/store"
)

// Query selects changes. Empty fields match everything.
type Query struct {
	User string `json:"user,omitempty"`
	// Verb matches the envelope's verb or its first word ("update"
	// matches "update status").
	Verb string `json:"verb,omitempty"`
	// Kind matches the kind, the resource (plural) or group/resource,
	// case-insensitively.
	Kind      string    `json:"kind,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	Until     time.Time `json:"until,omitzero"`
	// Limit returns at most this many entries, the newest; 0 for all.
	Limit int `json:"limit,omitempty"`
}

// Result is the matching changes, oldest first.
type Result struct {
	Entries []store.Summary `json:"entries"`
	// Scanned is how many events were read to answer.
	Scanned   int  `json:"scanned"`
	Truncated bool `json:"truncated,omitempty"`
}

func (q *Query) match(s *store.Summary) bool {
	if q.User != "" && s.User != q.User {
		return false
	}
	if q.Verb != "" && s.Verb != q.Verb && !strings.HasPrefix(s.Verb, q.Verb+" ") {
		return false
	}
	if q.Kind != "" && !matchKind(q.Kind, s) {
		return false
	}
	if q.Namespace != "" && s.Namespace != q.Namespace {
		return false
	}
	if q.Name != "" && s.Name != q.Name {
		return false
	}
	if !q.Since.IsZero() && s.Time.Before(q.Since) {
		return false
	}
	return q.Until.IsZero() || !s.Time.After(q.Until)
}

func matchKind(k string, s *store.Summary) bool {
	return strings.EqualFold(k, s.Kind) || strings.EqualFold(k, s.Resource) ||
		strings.EqualFold(k, s.Resource+"."+s.Group) || strings.EqualFold(k, s.Group+"/"+s.Resource)
}

// Run answers q from a read transaction.
func Run(tx *store.Tx, q Query) (*Result, error) {
	from, to := store.Pos{}, store.MaxPos(tx.Progress().Rev)
	// Times map to revisions through the time index; a margin of a
	// second covers clocks of several apiservers, the filter is exact.
	if !q.Since.IsZero() {
		if r := tx.FirstAfter(q.Since.Add(-time.Second)); r > 0 {
			from = store.Pos{Rev: r}
		} else {
			return &Result{}, nil
		}
	}
	if !q.Until.IsZero() {
		if r := tx.RevisionAt(q.Until.Add(time.Second)); r > 0 {
			to = store.MaxPos(r)
		} else {
			return &Result{}, nil
		}
	}
	res := &Result{}
	fn := func(s store.Summary) bool {
		res.Scanned++
		if q.match(&s) {
			res.Entries = append(res.Entries, s)
		}
		return true
	}
	var err error
	if q.User != "" {
		err = tx.ScanUser(q.User, from, to, fn)
	} else {
		err = tx.ScanAll(from, to, fn)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if q.Limit > 0 && len(res.Entries) > q.Limit {
		res.Entries = res.Entries[len(res.Entries)-q.Limit:]
		res.Truncated = true
	}
	return res, nil
}

// WriteText prints one line per entry:
//
//	2025-01-02T15:04:05.000Z 1234 alice update Deployment default/web
func (r *Result) WriteText(w io.Writer) error {
	for _, s := range r.Entries {
		name := s.Name
		if s.Namespace != "" {
			name = s.Namespace + "/" + s.Name
		}
		user := s.User
		if user == "" {
			user = "-"
		}
		kind := s.Kind
		if kind == "" {
			kind = s.Resource
		}
		_, err := fmt.Fprintf(w, "%s %-8s %-32s %-14s %s %s\n", s.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			s.Pos, user, s.Verb, kind, name)
		if err != nil {
			return err
		}
	}
	return nil
}
