package up

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// maxLogSize is the size above which OpenLog starts a new cairn.log,
// keeping the previous one as cairn.log.1.
const maxLogSize = 64 << 20

// OpenLog returns the structured logger of a `cairn up` on the data
// directory dataDir: every record at level or above is appended to
// Paths.Log (<data-dir>/cairn.log, created with the directory if missing;
// one over 64 MiB is moved to cairn.log.1 first, replacing the one
// before), and records at warn or above also go to stderr; at level
// debug, all of them do. The caller closes the file with closeLog once
// nothing logs any more.
func OpenLog(dataDir string, level slog.Level, stderr io.Writer) (log *slog.Logger, closeLog func() error, err error) {
	return openLog(dataDir, level, stderr, maxLogSize)
}

func openLog(dataDir string, level slog.Level, stderr io.Writer, maxSize int64) (*slog.Logger, func() error, error) {
	paths, err := PathsOf(dataDir)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(paths.Root, 0o700); err != nil {
		return nil, nil, fmt.Errorf("up: data dir: %w", err)
	}
	if fi, err := os.Stat(paths.Log); err == nil && fi.Size() > maxSize {
		if err := os.Rename(paths.Log, paths.Log+".1"); err != nil {
			return nil, nil, fmt.Errorf("up: log: %w", err)
		}
	}
	f, err := os.OpenFile(paths.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("up: log: %w", err)
	}
	errLevel := max(level, slog.LevelWarn)
	if level <= slog.LevelDebug {
		errLevel = level
	}
	h := slog.NewMultiHandler(
		slog.NewTextHandler(f, &slog.HandlerOptions{Level: level}),
		slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: errLevel}),
	)
	return slog.New(h), f.Close, nil
}
