package crilog

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line    string
		want    Record
		wantErr bool
	}{
		{line: "2024-01-02T03:04:05.123456789Z stdout F hello world",
			want: Record{Time: time.Date(2024, 1, 2, 3, 4, 5, 123456789, time.UTC), Stream: "stdout", Content: []byte("hello world")}},
		{line: "2024-01-02T03:04:05Z stderr P part",
			want: Record{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Stream: "stderr", Partial: true, Content: []byte("part")}},
		{line: "2024-01-02T03:04:05Z stdout F ",
			want: Record{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Stream: "stdout", Content: []byte{}}},
		{line: "2024-01-02T03:04:05Z stdout F",
			want: Record{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Stream: "stdout"}},
		{line: "garbage", wantErr: true},
		{line: "2024-01-02T03:04:05Z stdin F x", wantErr: true},
		{line: "2024-01-02T03:04:05Z stdout X x", wantErr: true},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.line))
		if (err != nil) != tt.wantErr {
			t.Errorf("Parse(%q) error %v", tt.line, err)
			continue
		}
		if err == nil && (!got.Time.Equal(tt.want.Time) || got.Stream != tt.want.Stream || got.Partial != tt.want.Partial ||
			!bytes.Equal(got.Content, tt.want.Content)) {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

const sample = `2024-01-02T03:04:01Z stdout F one
2024-01-02T03:04:02Z stderr P tw
2024-01-02T03:04:02.5Z stderr F o
not a record
2024-01-02T03:04:03Z stdout F three
`

func TestCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	os.WriteFile(path, []byte(sample), 0o644)
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"all", Options{TailLines: -1}, "one\ntwo\nthree\n"},
		{"tail 2", Options{TailLines: 2}, "two\nthree\n"},
		{"tail 0", Options{TailLines: 0}, ""},
		{"tail more", Options{TailLines: 10}, "one\ntwo\nthree\n"},
		{"timestamps", Options{TailLines: 1, Timestamps: true}, "2024-01-02T03:04:03Z three\n"},
		{"since", Options{TailLines: -1, Since: time.Date(2024, 1, 2, 3, 4, 3, 0, time.UTC)}, "three\n"},
		{"limit", Options{TailLines: -1, LimitBytes: 5}, "one\nt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Copy(context.Background(), &b, path, tt.o); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func TestCopyFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	os.WriteFile(path, []byte("2024-01-02T03:04:01Z stdout F one\n"), 0o644)
	var done bool
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	isDone := func() bool { <-mu; defer func() { mu <- struct{}{} }(); return done }
	pr, pw := ioPipe()
	errc := make(chan error, 1)
	go func() {
		errc <- Copy(context.Background(), pw, path, Options{TailLines: -1, Follow: true, Done: isDone, Poll: 10 * time.Millisecond})
		pw.Close()
	}()
	readLine(t, pr, "one\n")
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("2024-01-02T03:04:02Z stdout F two\n")
	readLine(t, pr, "two\n")
	f.WriteString("2024-01-02T03:04:03Z stdout F three\n")
	f.Close()
	<-mu
	done = true
	mu <- struct{}{}
	readLine(t, pr, "three\n")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	for _, l := range bytes.Split([]byte(sample), []byte("\n")) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Parse(line)
		if err == nil && r.Stream != "stdout" && r.Stream != "stderr" {
			t.Fatalf("bad stream %q", r.Stream)
		}
	})
}
