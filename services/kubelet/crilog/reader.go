package crilog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Options select what Copy writes.
type Options struct {
	// Timestamps prefixes each line with its time (RFC 3339 nano) and a space.
	Timestamps bool
	// TailLines, if >= 0, writes only the last TailLines lines present when
	// Copy starts; -1 writes all.
	TailLines int64
	// Since skips lines older than this time (zero: none).
	Since time.Time
	// LimitBytes stops after that many bytes (0: no limit).
	LimitBytes int64
	// Follow keeps reading as the file grows until Done reports true (the
	// container exited) and the end of the file is reached, or ctx ends.
	Follow bool
	// Done reports whether the writer of the file has finished.
	Done func() bool
	// Poll is how often a followed file is checked; 0 means 100ms.
	Poll time.Duration
}

// Copy writes the lines of the CRI log file at path to w as a user sees
// them. Malformed records are skipped.
func Copy(ctx context.Context, w io.Writer, path string, o Options) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("crilog: %w", err)
	}
	defer f.Close()
	if o.TailLines >= 0 {
		off, err := tailOffset(f, o.TailLines)
		if err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return fmt.Errorf("crilog: %w", err)
		}
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	cw := &copier{w: w, o: o}
	if fl, ok := w.(interface{ Flush() }); ok {
		cw.flush = fl.Flush
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var pending []byte // a record read without its newline yet
	for {
		chunk, err := br.ReadSlice('\n')
		pending = append(pending, chunk...)
		switch {
		case err == nil:
			if stop, werr := cw.record(pending[:len(pending)-1]); werr != nil || stop {
				return werr
			}
			pending = pending[:0]
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case !errors.Is(err, io.EOF):
			return fmt.Errorf("crilog: read: %w", err)
		}
		// End of file: done unless following a live writer.
		if !o.Follow {
			return nil
		}
		cw.doFlush()
		if o.Done != nil && o.Done() {
			// One more read: the writer may have finished after our last one.
			if _, err := br.Peek(1); err != nil {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Poll):
		}
	}
}

type copier struct {
	w       io.Writer
	o       Options
	written int64
	flush   func()
}

func (c *copier) doFlush() {
	if c.flush != nil {
		c.flush()
	}
}

// record writes one record; stop is true once LimitBytes is reached.
func (c *copier) record(line []byte) (stop bool, err error) {
	r, err := Parse(line)
	if err != nil {
		return false, nil
	}
	if !c.o.Since.IsZero() && r.Time.Before(c.o.Since) {
		return false, nil
	}
	var out []byte
	if c.o.Timestamps {
		out = append(out, r.Time.Format(time.RFC3339Nano)...)
		out = append(out, ' ')
	}
	out = append(out, r.Content...)
	if !r.Partial {
		out = append(out, '\n')
	}
	if c.o.LimitBytes > 0 && c.written+int64(len(out)) > c.o.LimitBytes {
		out = out[:c.o.LimitBytes-c.written]
		stop = true
	}
	n, err := c.w.Write(out)
	c.written += int64(n)
	if err != nil {
		return true, fmt.Errorf("crilog: write: %w", err)
	}
	return stop, nil
}

// tailOffset is the offset of the first record of the last n lines (a line
// ends with an F record).
func tailOffset(f *os.File, n int64) (int64, error) {
	if n == 0 {
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return 0, fmt.Errorf("crilog: %w", err)
		}
		return end, nil
	}
	var starts []int64 // start offsets of lines (after an F record)
	br := bufio.NewReader(f)
	var off int64
	lineStart := int64(0)
	for {
		rec, err := br.ReadBytes('\n')
		if len(rec) > 0 && rec[len(rec)-1] == '\n' {
			if r, perr := Parse(rec[:len(rec)-1]); perr == nil && !r.Partial {
				starts = append(starts, lineStart)
				lineStart = off + int64(len(rec))
			}
		}
		off += int64(len(rec))
		if err != nil {
			break
		}
	}
	if int64(len(starts)) <= n {
		return 0, nil
	}
	return starts[int64(len(starts))-n], nil
}
