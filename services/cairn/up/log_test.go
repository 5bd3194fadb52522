package up

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOpenLog(t *testing.T) {
	tests := []struct {
		level      slog.Level
		wantFile   []string // messages in cairn.log
		wantStderr []string
	}{
		{level: slog.LevelInfo, wantFile: []string{"info", "warn", "error"}, wantStderr: []string{"warn", "error"}},
		{level: slog.LevelDebug, wantFile: []string{"debug", "info", "warn", "error"}, wantStderr: []string{"debug", "info", "warn", "error"}},
		{level: slog.LevelError, wantFile: []string{"error"}, wantStderr: []string{"error"}},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			var stderr bytes.Buffer
			log, closeLog, err := OpenLog(dir, tt.level, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("debug")
			log.Info("info")
			log.Warn("warn")
			log.Error("error")
			if err := closeLog(); err != nil {
				t.Fatal(err)
			}
			file, err := os.ReadFile(filepath.Join(dir, "cairn.log"))
			if err != nil {
				t.Fatal(err)
			}
			if got := messages(string(file)); !slices.Equal(got, tt.wantFile) {
				t.Errorf("cairn.log has %q, want %q", got, tt.wantFile)
			}
			if got := messages(stderr.String()); !slices.Equal(got, tt.wantStderr) {
				t.Errorf("stderr has %q, want %q", got, tt.wantStderr)
			}
		})
	}

	// A restart appends to the same file.
	dir := t.TempDir()
	for range 2 {
		log, closeLog, err := OpenLog(dir, slog.LevelInfo, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("info")
		closeLog()
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cairn.log"))
	if got := messages(string(b)); !slices.Equal(got, []string{"info", "info"}) {
		t.Errorf("after two opens cairn.log has %q, want two records", got)
	}

	// A log over the limit is moved aside at the next open.
	log, closeLog, err := openLog(dir, slog.LevelInfo, &bytes.Buffer{}, int64(len(b)-1))
	if err != nil {
		t.Fatal(err)
	}
	log.Info("fresh")
	closeLog()
	old, _ := os.ReadFile(filepath.Join(dir, "cairn.log.1"))
	cur, _ := os.ReadFile(filepath.Join(dir, "cairn.log"))
	if !bytes.Equal(old, b) || !slices.Equal(messages(string(cur)), []string{"fresh"}) {
		t.Errorf("after rotation cairn.log.1 = %q, cairn.log = %q; want the old records, then only the new one", old, cur)
	}
}

// messages returns the msg= of each text record in s.
func messages(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if _, m, ok := strings.Cut(l, "msg="); ok {
			out = append(out, m)
		}
	}
	return out
}
