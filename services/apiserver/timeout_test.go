package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// timeoutServer serves handler through a timeoutFilter with a deadline of
// d from the request's arrival; wait waits for the handlers.
func timeoutServer(t *testing.T, d time.Duration, handler http.HandlerFunc) (url string, wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	f := timeoutFilter{late: &wg, log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		w.Header().Set("Audit-Id", "outer")
		f.serve(w, r.WithContext(ctx), handler)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, wg.Wait
}

func getStatus(t *testing.T, url string) (*http.Response, metav1.Status) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st metav1.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("%d: body is not JSON: %v", resp.StatusCode, err)
	}
	return resp, st
}

func wantTimeout(t *testing.T, resp *http.Response, st metav1.Status) {
	t.Helper()
	const msg = "Timeout: request did not complete within requested timeout - context deadline exceeded"
	if resp.StatusCode != http.StatusGatewayTimeout || st.Kind != "Status" || st.Code != http.StatusGatewayTimeout ||
		st.Reason != metav1.StatusReasonTimeout || st.Message != msg || st.Status != metav1.StatusFailure {
		t.Fatalf("got %d %+v, want 504 Timeout %q", resp.StatusCode, st, msg)
	}
}

// A handler still working at the deadline: the client gets the 504 at
// once, the handler's headers do not leak into it, and its later writes
// get http.ErrHandlerTimeout (run with -race: they must not race the
// timeout's).
func TestTimeoutLateHandler(t *testing.T) {
	answered := make(chan struct{})
	late := make(chan error, 1)
	url, wait := timeoutServer(t, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "early")
		<-r.Context().Done()
		<-answered
		w.Header().Set("X-Handler", "late")
		w.WriteHeader(http.StatusCreated)
		_, err := w.Write([]byte("late"))
		w.(http.Flusher).Flush()
		late <- err
	})
	resp, st := getStatus(t, url)
	close(answered)
	wantTimeout(t, resp, st)
	if h := resp.Header.Get("X-Handler"); h != "" {
		t.Errorf("the 504 carries the handler's header X-Handler: %q", h)
	}
	if resp.Header.Get("Audit-Id") != "outer" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v, want the outer Audit-Id and JSON", resp.Header)
	}
	if err := <-late; !errors.Is(err, http.ErrHandlerTimeout) {
		t.Errorf("late write: %v, want http.ErrHandlerTimeout", err)
	}
	wait()
}

// A handler that answers after the deadline, before the filter has acted
// on it, does not get its answer through: the client gets the 504.
func TestTimeoutAnswerAfterDeadline(t *testing.T) {
	url, wait := timeoutServer(t, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		writeJSON(w, http.StatusOK, map[string]string{"kind": "Status"})
	})
	for range 20 {
		resp, st := getStatus(t, url)
		wantTimeout(t, resp, st)
	}
	wait()
}

// A handler that answers in time is answered as it wrote, headers and
// all.
func TestTimeoutInTime(t *testing.T) {
	url, wait := timeoutServer(t, time.Minute, func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Context().Deadline(); !ok {
			t.Error("the handler's context has no deadline")
		}
		w.Header().Set("X-Handler", "yes")
		writeStatus(w, errBadRequest("no"))
	})
	resp, st := getStatus(t, url)
	if resp.StatusCode != http.StatusBadRequest || st.Message != "no" || resp.Header.Get("X-Handler") != "yes" {
		t.Fatalf("got %d %v %+v", resp.StatusCode, resp.Header, st)
	}
	wait()
}

// A handler that has started its answer when the deadline passes cannot
// be answered 504: the response is cut off, as kube's timeout filter
// aborts it.
func TestTimeoutAfterAnswerStarted(t *testing.T) {
	url, wait := timeoutServer(t, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("the cut-off response read to its end: %d %q", resp.StatusCode, b)
	}
	wait()
}

func TestRequestDeadline(t *testing.T) {
	s := &Server{cfg: Config{RequestTimeout: time.Minute}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		query string
		want  time.Duration
	}{
		{"", time.Minute},
		{"?timeout=1s", time.Second},
		{"?timeout=250ms", 250 * time.Millisecond},
		{"?timeout=59s", 59 * time.Second},
		// 0 or less asks for no timeout of the client's own; more than
		// the maximum gets the maximum.
		{"?timeout=0s", time.Minute},
		{"?timeout=-1s", time.Minute},
		{"?timeout=1h", time.Minute},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/pods"+tt.query, nil)
		got, err := s.requestDeadline(r, start)
		if err != nil || got != start.Add(tt.want) {
			t.Errorf("%q: %v %v, want %v", tt.query, got.Sub(start), err, tt.want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods?timeout=soon", nil)
	_, err := s.requestDeadline(r, start)
	st := statusFor(err)
	if want := `invalid timeout specified in the request URL - time: invalid duration "soon"`; st.Code != http.StatusBadRequest ||
		st.Reason != metav1.StatusReasonBadRequest || st.Message != want {
		t.Errorf("bad timeout: %+v, want 400 %q", st, want)
	}
}

func TestIsLongRunning(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/api/v1/namespaces/default/pods?watch=true", true},
		{"GET", "/api/v1/watch/namespaces/default/pods", true},
		{"GET", "/api/v1/namespaces/default/pods/p/log", true},
		{"POST", "/api/v1/namespaces/default/pods/p/exec", true},
		{"POST", "/api/v1/namespaces/default/pods/p/attach", true},
		{"POST", "/api/v1/namespaces/default/pods/p/portforward", true},
		{"GET", "/api/v1/namespaces/default/services/s/proxy/x", true},
		{"GET", "/api/v1/nodes/n/proxy/metrics", true},
		{"GET", "/api/v1/namespaces/default/pods", false},
		{"GET", "/api/v1/namespaces/default/pods?watch=false", false},
		{"POST", "/api/v1/namespaces/default/pods", false},
		{"PUT", "/api/v1/namespaces/default/pods/p/status", false},
		{"POST", "/api/v1/namespaces/default/pods/p/binding", false},
		{"GET", "/readyz", false},
	} {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if got := isLongRunning(r, parseRequestInfo(r)); got != tt.want {
			t.Errorf("%s %s: long-running %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

// An etcd call given up at the request's deadline is the request's 504,
// not a 500.
func TestStatusForDeadline(t *testing.T) {
	st := statusFor(fmt.Errorf("storage: create /registry/pods/default/p: %w", context.DeadlineExceeded))
	if st.Code != http.StatusGatewayTimeout || st.Reason != metav1.StatusReasonTimeout ||
		st.Message != "Timeout: request did not complete within requested timeout - context deadline exceeded" {
		t.Errorf("got %+v", st)
	}
	if st := statusFor(errors.New("etcdserver: request timed out")); st.Code != http.StatusInternalServerError {
		t.Errorf("etcd's own timeout: %+v, want 500 as kube", st)
	}
}
