package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// DefaultRequestTimeout bounds a request that is not long-running when
// Config.RequestTimeout is not set (kube-apiserver's --request-timeout).
const DefaultRequestTimeout = 60 * time.Second

// invalidTimeoutInURL is kube's message for a timeout query parameter that
// is not a Go duration.
const invalidTimeoutInURL = "invalid timeout specified in the request URL"

// isLongRunning is kube's BasicLongRunningRequestCheck (the one APF uses):
// watches, proxy and the log, exec, attach, portforward and proxy
// subresources are not bounded by the request timeout.
func isLongRunning(r *http.Request, info requestInfo) bool {
	return longRunning(r, kubeRequestInfo(info))
}

// requestDeadline is when a request that is not long-running must have
// been answered, as kube's WithRequestDeadline computes it: start plus the
// server's maximum, or plus the timeout query parameter (a Go duration)
// where that is positive and smaller. A timeout that does not parse is a
// 400 BadRequest.
func (s *Server) requestDeadline(r *http.Request, start time.Time) (time.Time, error) {
	timeout := s.cfg.RequestTimeout
	v := r.URL.Query().Get("timeout")
	if v == "" {
		return start.Add(timeout), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return time.Time{}, apierrors.NewBadRequest(fmt.Sprintf("%s - %s", invalidTimeoutInURL, err.Error()))
	}
	if d > 0 && d < timeout {
		timeout = d
	}
	return start.Add(timeout), nil
}

// errRequestTimeout is the 504 of a request whose context is done: kube's
// finisher's answer ("Timeout: request did not complete within requested
// timeout - context deadline exceeded").
func errRequestTimeout(ctx context.Context) *apierrors.StatusError {
	cause := ctx.Err()
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	return apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within requested timeout - %s", cause), 0)
}

// timeoutFilter runs handlers under their request context's deadline, as
// kube's WithTimeoutForNonLongRunningRequests: the handler runs in its own
// goroutine and, if it has not started its answer when the context is
// done, the client gets a 504 Timeout Status at once. The handler goes on
// until it notices its context; its later writes get
// http.ErrHandlerTimeout.
type timeoutFilter struct {
	// late tracks handlers that outlive their request, so that the
	// server's shutdown waits for them.
	late *sync.WaitGroup
	log  *slog.Logger
}

// serve runs next on r (whose context carries the deadline) and answers w.
//
// A handler that has started its answer when the deadline passes cannot
// be timed out cleanly: the connection is aborted (http.ErrAbortHandler),
// as kube does. A handler that panics before the deadline re-panics here,
// in the server's goroutine; one that panics after it is logged.
func (f timeoutFilter) serve(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request)) {
	ctx := r.Context()
	tw := &timeoutWriter{w: w, ctx: ctx, header: w.Header().Clone()}
	result := make(chan any)
	abandoned := make(chan struct{})
	// The handler gets its own copy of the request: this goroutine
	// returns, and the server reuses r, while the handler may still run.
	rc := r.Clone(ctx)
	f.late.Add(1)
	go func() {
		defer f.late.Done()
		start := time.Now()
		defer func() {
			p := recover()
			if p != nil && p != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				p = fmt.Sprintf("%v\n%s", p, buf[:runtime.Stack(buf, false)])
			}
			select {
			case result <- p:
			case <-abandoned:
				if p != nil {
					f.log.Error("handler panicked after its request timed out", "method", rc.Method, "path", rc.URL.Path, "panic", p)
					return
				}
				f.log.Debug("handler finished after its request timed out", "method", rc.Method, "path", rc.URL.Path,
					"elapsed", time.Since(start))
			}
		}()
		next(tw, rc)
	}()
	select {
	case p := <-result:
		if p != nil {
			panic(p)
		}
		// A handler whose writes were refused because the deadline had
		// passed still gets the client its 504.
		if ctx.Err() != nil {
			tw.timeout(errRequestTimeout(ctx))
		}
	case <-ctx.Done():
		close(abandoned)
		if !tw.timeout(errRequestTimeout(ctx)) {
			panic(http.ErrAbortHandler)
		}
	}
}

// timeoutWriter is the handler's http.ResponseWriter under a timeoutFilter
// (kube's baseTimeoutWriter). Its methods are safe to call from the handler
// while the filter times the request out: the first to take mu answers.
// The handler's headers are its own until it writes, so that a timeout
// never sends half of them.
type timeoutWriter struct {
	w      http.ResponseWriter
	ctx    context.Context
	header http.Header

	mu sync.Mutex
	// timedOut: the filter has answered (or given up on) the request.
	timedOut bool
	// wrote: the handler's status line has gone to w.
	wrote bool
}

var _ http.Flusher = (*timeoutWriter)(nil)

func (tw *timeoutWriter) Header() http.Header {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return http.Header{}
	}
	return tw.header
}

// start sends the handler's headers and status unless the request has
// timed out or its deadline has passed; it reports whether the handler
// may write. A handler that answers after the deadline does not get its
// answer through even before the filter notices: the client gets the 504.
func (tw *timeoutWriter) start(code int) bool {
	if tw.timedOut {
		return false
	}
	if tw.wrote {
		return true
	}
	if tw.ctx.Err() != nil {
		return false
	}
	h := tw.w.Header()
	for k, v := range tw.header {
		h[k] = v
	}
	tw.wrote = true
	if code != 0 {
		tw.w.WriteHeader(code)
	}
	return true
}

func (tw *timeoutWriter) WriteHeader(code int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if !tw.wrote {
		tw.start(code)
	}
}

func (tw *timeoutWriter) Write(p []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if !tw.start(0) {
		return 0, http.ErrHandlerTimeout
	}
	return tw.w.Write(p)
}

func (tw *timeoutWriter) Flush() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if !tw.start(0) {
		return
	}
	if f, ok := tw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// timeout ends the handler's use of w. If the handler has not written it
// answers err and returns true; otherwise the response is half sent and it
// returns false (the caller aborts the connection).
func (tw *timeoutWriter) timeout(err *apierrors.StatusError) bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.timedOut = true
	if tw.wrote {
		return false
	}
	tw.wrote = true
	writeStatus(tw.w, err)
	return true
}
