package up

import (
	"fmt"
	"io"
	"sync"
)

// Reporter writes cairn up's progress for the person who started it: one
// plain line per component as it becomes ready, then the line that tells
// them how to use the cluster. Structured logs never go through it (see
// OpenLog). Its methods are safe for concurrent use and never fail: a
// write error on the terminal is not the cluster's.
type Reporter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewReporter returns a Reporter writing to w (cairn up's stdout).
func NewReporter(w io.Writer) *Reporter { return &Reporter{w: w} }

// Ready reports that component serves: "<component> ready (<detail>)",
// or "<component> ready" when detail is empty. Call it once per
// component, when what it says is true.
func (r *Reporter) Ready(component, detail string) {
	if detail == "" {
		r.printf("%s ready\n", component)
		return
	}
	r.printf("%s ready (%s)\n", component, detail)
}

// Written reports a file cairn up wrote for its user: "<what> written
// (<path>)".
func (r *Reporter) Written(what, path string) { r.printf("%s written (%s)\n", what, path) }

// AllReady reports that all n services are ready, where the structured log
// goes, and the line that points kubectl at the cluster.
func (r *Reporter) AllReady(n int, logPath, kubeconfig string) {
	r.printf("cairn up: all %d services ready; log in %s\nexport KUBECONFIG=%s\n", n, logPath, kubeconfig)
}

func (r *Reporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = fmt.Fprintf(r.w, format, args...)
}
