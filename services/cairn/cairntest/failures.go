package cairntest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Failures is a test that keeps its failure messages and logs them again
// when it ends, after the output of its processes that the cleanups print
// (StartUp, NewProc): a long multi-process test's log ends with why it
// failed, which is all a CI summary of its last lines may show.
type Failures struct {
	*testing.T
	mu   sync.Mutex
	msgs []string
}

// RecordFailures wraps t. Call it first in the test, before anything that
// registers a cleanup, so that its cleanup runs last.
func RecordFailures(t *testing.T) *Failures {
	f := &Failures{T: t}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if t.Failed() && len(f.msgs) > 0 {
			t.Logf("%s failed (%d messages, repeated after the processes' output):\n%s", t.Name(), len(f.msgs), strings.Join(f.msgs, "\n"))
		}
	})
	return f
}

func (f *Failures) record(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, "  "+Tail(msg, 20))
}

func (f *Failures) Error(args ...any) {
	f.T.Helper()
	f.record(fmt.Sprint(args...))
	f.T.Error(args...)
}

func (f *Failures) Errorf(format string, args ...any) {
	f.T.Helper()
	f.record(fmt.Sprintf(format, args...))
	f.T.Errorf(format, args...)
}

func (f *Failures) Fatal(args ...any) {
	f.T.Helper()
	f.record(fmt.Sprint(args...))
	f.T.Fatal(args...)
}

func (f *Failures) Fatalf(format string, args ...any) {
	f.T.Helper()
	f.record(fmt.Sprintf(format, args...))
	f.T.Fatalf(format, args...)
}
