package events

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// TailOptions selects the events Tail delivers. Empty fields match
// everything.
type TailOptions struct {
	// Group is the API group ("core" or "" for the legacy group when
	// Resource is set; "" with no Resource matches every group).
	Group     string
	Resource  string
	Kind      string // matched on the client: kinds are not in the subject
	Node      string // spec.nodeName of pods
	Namespace string
	Name      string
	// FromRevision is the first revision delivered; 0 starts at the oldest
	// event the stream keeps.
	FromRevision Revision
	// Follow keeps waiting for new events; otherwise Tail returns after the
	// last event stored when it started.
	Follow bool
}

// subject is the server-side filter of o.
func (o TailOptions) subject() (stream, filter string) {
	f := Filter(o.Group, o.Resource, o.Node, o.Namespace, o.Name)
	if o.Group == "" && o.Resource == "" {
		// No group given: every group, not only the core one.
		prefix, rest, _ := strings.Cut(f, ".core.")
		f = prefix + ".*." + rest
	}
	if IsLease(o.Group, o.Resource) {
		return LeaseStream, f
	}
	return Stream, f
}

// Tail calls fn for every event that matches opts, in log order, with an
// ordered consumer filtered by subject on the server. It returns nil when
// done (at the end of the stored events without Follow, or when ctx ends
// with Follow), the error of fn if fn fails, and ErrTooOld if FromRevision
// is older than the stream keeps.
//
// Leases are on their own stream: Tail reads it only when opts selects
// coordination.k8s.io leases.
func Tail(ctx context.Context, js jetstream.JetStream, opts TailOptions, fn func(*Event) error) error {
	stream, filter := opts.subject()
	ro := ReadOptions{Stream: stream, Filters: []string{filter}, Follow: opts.Follow}
	if opts.FromRevision > 0 {
		seq, err := SeekRevision(ctx, js, stream, opts.FromRevision)
		if err != nil {
			return fmt.Errorf("events: tail: %w", err)
		}
		ro.FromSeq = seq
	}
	err := Read(ctx, js, ro, func(m *Msg) error {
		ev, err := m.Event()
		if err != nil {
			return fmt.Errorf("events: tail %s: %w", stream, err)
		}
		if opts.Kind == "" || strings.EqualFold(ev.Kind, opts.Kind) {
			return fn(ev)
		}
		return nil
	})
	if err != nil && opts.Follow && ctx.Err() != nil {
		return nil
	}
	return err
}

// FormatLine renders an event as one line:
//
//	2025-01-02T15:04:05.000Z 1234 ADDED Pod default/web-0 alice
//
// (time in RFC 3339 with milliseconds, revision, type, kind, namespace/name
// or just the name when cluster-scoped, actor; "-" for no actor).
func FormatLine(e *Event) string {
	name := e.Name
	if e.Namespace != "" {
		name = e.Namespace + "/" + e.Name
	}
	user := e.Actor.User
	if user == "" {
		user = "-"
	}
	kind := e.Kind
	if kind == "" {
		kind = e.Resource
	}
	return fmt.Sprintf("%s %s %s %s %s %s", e.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		e.Revision, e.Type, kind, name, user)
}
