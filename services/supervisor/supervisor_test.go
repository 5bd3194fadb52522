package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// journal records what the fake services did, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf(format, args...))
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

// fake is a service whose behaviour the test scripts.
type fake struct {
	name string
	j    *journal
	// readyAfter delays the ready call; never means it never calls ready.
	readyAfter time.Duration
	never      bool
	// failAfter, when > 0, makes Run return failErr (nil: exit early)
	// that long after ready.
	failAfter time.Duration
	failErr   error
	// stopErr is returned when the context is cancelled.
	stopErr error
	// stopDelay delays the return after cancellation.
	stopDelay time.Duration
}

func (f *fake) Name() string     { return f.name }
func (f *fake) Describe() string { return "detail of " + f.name }

func (f *fake) Run(ctx context.Context, ready func()) error {
	f.j.add("start %s", f.name)
	if !f.never {
		select {
		case <-time.After(f.readyAfter):
			f.j.add("ready %s", f.name)
			ready()
			ready() // a second call is harmless
		case <-ctx.Done():
			f.j.add("stop %s", f.name)
			return ctx.Err()
		}
	}
	var fail <-chan time.Time
	if f.failAfter > 0 {
		fail = time.After(f.failAfter)
	}
	select {
	case <-fail:
		f.j.add("fail %s", f.name)
		return f.failErr
	case <-ctx.Done():
	}
	time.Sleep(f.stopDelay)
	f.j.add("stop %s", f.name)
	if f.stopErr != nil {
		return f.stopErr
	}
	return ctx.Err()
}

func TestStartAndStopOrder(t *testing.T) {
	j := &journal{}
	svcs := []Service{
		&fake{name: "etcd", j: j, readyAfter: 20 * time.Millisecond},
		&fake{name: "nats", j: j, readyAfter: 5 * time.Millisecond},
		&fake{name: "apiserver", j: j},
	}
	var readyLines []string
	ctx, cancel := context.WithCancel(t.Context())
	opts := Options{
		OnReady: func(name, detail string) {
			readyLines = append(readyLines, name+" ready ("+detail+")")
		},
		OnAllReady: func() {
			readyLines = append(readyLines, "all ready")
			cancel()
		},
	}
	if err := Run(ctx, opts, svcs...); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	want := []string{
		"start etcd", "ready etcd",
		"start nats", "ready nats",
		"start apiserver", "ready apiserver",
		"stop apiserver", "stop nats", "stop etcd",
	}
	if got := j.get(); !slices.Equal(got, want) {
		t.Errorf("journal =\n%q\nwant\n%q", got, want)
	}
	wantReady := []string{
		"etcd ready (detail of etcd)",
		"nats ready (detail of nats)",
		"apiserver ready (detail of apiserver)",
		"all ready",
	}
	if !slices.Equal(readyLines, wantReady) {
		t.Errorf("ready lines = %q, want %q", readyLines, wantReady)
	}
}

var (
	errBoom = errors.New("boom")
	errStop = errors.New("stop failed")
)

func TestStopOnFailure(t *testing.T) {
	tests := []struct {
		name        string
		svcs        func(j *journal) []Service
		cancelAfter time.Duration // cancel the parent context; 0: never
		wantErr     []error       // each must match with errors.Is; nil: Run returns nil
		wantPrefix  string        // the error message starts with it
		wantJournal []string
	}{
		{
			name: "error after ready stops all in reverse order",
			svcs: func(j *journal) []Service {
				return []Service{
					&fake{name: "a", j: j},
					&fake{name: "b", j: j, failAfter: 10 * time.Millisecond, failErr: errBoom},
					&fake{name: "c", j: j},
				}
			},
			wantErr:     []error{errBoom},
			wantPrefix:  "b: boom",
			wantJournal: []string{"start a", "ready a", "start b", "ready b", "start c", "ready c", "fail b", "stop c", "stop a"},
		},
		{
			name: "error before ready: later services never start",
			svcs: func(j *journal) []Service {
				return []Service{
					&fake{name: "a", j: j},
					&fake{name: "b", j: j, never: true, failAfter: time.Millisecond, failErr: errBoom},
					&fake{name: "c", j: j},
				}
			},
			wantErr:     []error{errBoom},
			wantPrefix:  "b: boom",
			wantJournal: []string{"start a", "ready a", "start b", "fail b", "stop a"},
		},
		{
			name: "early nil return is an error",
			svcs: func(j *journal) []Service {
				return []Service{
					&fake{name: "a", j: j},
					&fake{name: "b", j: j, failAfter: time.Millisecond},
				}
			},
			wantErr:     []error{ErrExited},
			wantPrefix:  "b: supervisor: service exited",
			wantJournal: []string{"start a", "ready a", "start b", "ready b", "fail b", "stop a"},
		},
		{
			name: "cause first, then errors while stopping",
			svcs: func(j *journal) []Service {
				return []Service{
					&fake{name: "a", j: j, stopErr: errStop},
					&fake{name: "b", j: j, failAfter: time.Millisecond, failErr: errBoom},
				}
			},
			wantErr:     []error{errBoom, errStop},
			wantPrefix:  "b: boom\na: stop: stop failed",
			wantJournal: []string{"start a", "ready a", "start b", "ready b", "fail b", "stop a"},
		},
		{
			name: "error while stopping after cancel",
			svcs: func(j *journal) []Service {
				return []Service{
					&fake{name: "a", j: j},
					&fake{name: "b", j: j, stopErr: errStop},
				}
			},
			cancelAfter: 10 * time.Millisecond,
			wantErr:     []error{errStop},
			wantPrefix:  "b: stop: stop failed",
			wantJournal: []string{"start a", "ready a", "start b", "ready b", "stop b", "stop a"},
		},
		{
			name: "cancel while a service starts",
			svcs: func(j *journal) []Service {
				return []Service{
					&fake{name: "a", j: j},
					&fake{name: "b", j: j, never: true},
					&fake{name: "c", j: j},
				}
			},
			cancelAfter: 10 * time.Millisecond,
			wantJournal: []string{"start a", "ready a", "start b", "stop b", "stop a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancelAfter > 0 {
				timer := time.AfterFunc(tt.cancelAfter, cancel)
				defer timer.Stop()
			}
			err := Run(ctx, Options{}, tt.svcs(j)...)
			if tt.wantErr == nil && err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("Run = %v, want errors.Is %v", err, want)
				}
			}
			if err != nil && !strings.HasPrefix(err.Error(), tt.wantPrefix) {
				t.Errorf("Run = %q, want prefix %q", err, tt.wantPrefix)
			}
			if got := j.get(); !slices.Equal(got, tt.wantJournal) {
				t.Errorf("journal =\n%q\nwant\n%q", got, tt.wantJournal)
			}
		})
	}
}

func TestNoServicesWaitsForCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	allReady := false
	if err := Run(ctx, Options{OnAllReady: func() { allReady = true }}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !allReady {
		t.Error("OnAllReady not called with no services")
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Error("Run returned before the context was done")
	}
}

func TestSlowStopIsLoggedAndAwaited(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	j := &journal{}
	ctx, cancel := context.WithCancel(t.Context())
	opts := Options{
		Log:      log,
		SlowStop: 5 * time.Millisecond,
		OnReady:  func(string, string) { cancel() },
	}
	if err := Run(ctx, opts, &fake{name: "slow", j: j, stopDelay: 30 * time.Millisecond}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := j.get(); !slices.Contains(got, "stop slow") {
		t.Errorf("Run returned before the service stopped: %q", got)
	}
	if !strings.Contains(buf.String(), "still waiting for service to stop") {
		t.Errorf("no slow-stop warning in log:\n%s", buf.String())
	}
}

func TestFunc(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var got []string
	svc := Func("f", func(ctx context.Context, ready func()) error {
		ready()
		<-ctx.Done()
		return nil
	})
	opts := Options{OnReady: func(name, detail string) {
		got = append(got, name+"|"+detail)
		cancel()
	}}
	if err := Run(ctx, opts, svc); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !slices.Equal(got, []string{"f|"}) {
		t.Errorf("ready = %q", got)
	}
}
