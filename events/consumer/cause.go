package consumer

import (
	"context"
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
)

// Cause is the event a piece of work reacts to: the id of that event and
// the id of the root of its causal chain. The zero Cause means "no event"
// (work from a snapshot, a periodic requeue): writes made for it start a new
// chain.
type Cause struct {
	// EventID is the id of the triggering event; it becomes the causationID
	// of the events the reaction writes.
	EventID string
	// CorrelationID is the triggering event's correlationID (its own id
	// when it started the chain).
	CorrelationID string
	// Revision is the triggering event's revision (for logs).
	Revision events.Revision
}

// IsZero reports whether c names no event.
func (c Cause) IsZero() bool { return c.EventID == "" }

// CauseOf is the cause an event gives the work it triggers. A nil event
// gives the zero Cause.
func CauseOf(ev *events.Event) Cause {
	if ev == nil {
		return Cause{}
	}
	corr := ev.CorrelationID
	if corr == "" {
		corr = ev.ID
	}
	return Cause{EventID: ev.ID, CorrelationID: corr, Revision: ev.Revision}
}

type causeKey struct{}

// WithCause returns a context that carries c. Requests made with it through
// a client built from WrapConfig carry c's ids as the X-Cairn-Causation-Id
// and X-Cairn-Correlation-Id headers.
func WithCause(ctx context.Context, c Cause) context.Context {
	return context.WithValue(ctx, causeKey{}, c)
}

// CauseFrom is the cause ctx carries, the zero Cause if none.
func CauseFrom(ctx context.Context) Cause {
	c, _ := ctx.Value(causeKey{}).(Cause)
	return c
}

// WrapConfig returns a copy of cfg whose transport sets the causation
// headers from each request's context (see WithCause). client-go passes the
// ctx of every call (Create(ctx, ...), Update(ctx, ...)) to its request, so
// a reconciler only has to use the ctx it was given. Requests whose context
// carries no cause are sent unchanged.
func WrapConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return causeTransport{next: rt} })
	return c
}

// causeTransport sets the causation headers on requests.
type causeTransport struct{ next http.RoundTripper }

func (t causeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := CauseFrom(req.Context())
	if c.IsZero() {
		return t.next.RoundTrip(req)
	}
	// A RoundTripper must not modify the request it was given.
	r := req.Clone(req.Context())
	r.Header.Set(events.HeaderCausationID, c.EventID)
	if c.CorrelationID != "" {
		r.Header.Set(events.HeaderCorrelationID, c.CorrelationID)
	}
	return t.next.RoundTrip(r)
}
