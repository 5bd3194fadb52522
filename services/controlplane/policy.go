package controlplane

import (
	"context"
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// The admission policies' and APF's informers list and watch through the
// apiserver's own handler: streamLoopback is the loopback transport for
// them, streaming responses (a watch never ends) instead of buffering.

type streamLoopback struct{ l *loopback }

// policyConfig is a rest.Config of the streaming loopback client.
func (l *loopback) policyConfig() *rest.Config {
	return l.streamConfig("cairn-validating-admission-policy")
}

// streamConfig is a rest.Config of the streaming loopback client that
// presents userAgent.
func (l *loopback) streamConfig(userAgent string) *rest.Config {
	c := l.config()
	c.Transport = streamLoopback{l}
	c.UserAgent = userAgent
	return c
}

func (s streamLoopback) RoundTrip(r *http.Request) (*http.Response, error) {
	h := s.l.handler.Load()
	if h == nil {
		return s.l.RoundTrip(r)
	}
	ctx, cancel := context.WithCancel(r.Context())
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer cancel()
		(*h).ServeHTTP(w, r.WithContext(ctx))
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	go func() {
		// A client that gives up (its context ends) without closing the
		// body must not leave the handler blocked on a write nobody reads.
		select {
		case <-ctx.Done():
			_ = pw.CloseWithError(ctx.Err())
		case <-served:
		}
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		cancel()
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: w.code, Status: http.StatusText(w.code), Header: w.sent, Request: r,
		Body: &cancelBody{ReadCloser: pr, cancel: cancel}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
}

type pipeWriter struct {
	header http.Header
	sent   http.Header
	code   int
	once   sync.Once
	ready  chan struct{}
	pw     *io.PipeWriter
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

func (w *pipeWriter) Flush() {}

// cancelBody ends the handler when the client closes the body.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}
