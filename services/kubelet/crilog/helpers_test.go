package crilog

import (
	"bufio"
	"io"
	"testing"
)

type pipeReader struct {
	*bufio.Reader
	c io.Closer
}

func ioPipe() (*pipeReader, *io.PipeWriter) {
	r, w := io.Pipe()
	return &pipeReader{Reader: bufio.NewReader(r), c: r}, w
}

func readLine(t *testing.T, r *pipeReader, want string) {
	t.Helper()
	got, err := r.ReadString('\n')
	if err != nil || got != want {
		t.Fatalf("read %q (%v), want %q", got, err, want)
	}
}
