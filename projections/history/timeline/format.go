package timeline

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/projections/history/store"
)

// Title is "Kind ns/name" (or "Kind name" when cluster-scoped).
func (o Object) Title() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

func (o Object) short() string { return o.Kind + "/" + o.Name }

// Sentence describes a step with its latency: "scheduled to node-1 41 ms
// after created (Pod/web-1)".
func (t *Timeline) Sentence(i int) string {
	s := t.Steps[i]
	what := s.What
	if len(s.MutatedBy) > 0 {
		what += ", mutated by " + strings.Join(s.MutatedBy, ", ")
	}
	if s.Cause < 0 {
		return what
	}
	c := t.Steps[s.Cause]
	from := c.What
	if c.Object != s.Object {
		from += " of " + t.Objects[c.Object].short()
	}
	return fmt.Sprintf("%s %s after %s", what, FormatLatency(s.LatencyMS), from)
}

// FormatLatency renders milliseconds compactly: "41 ms", "1.2 s", "3m5s".
func FormatLatency(ms float64) string {
	switch {
	case ms < 10:
		return fmt.Sprintf("%.1f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	case ms < 60000:
		return fmt.Sprintf("%.1f s", ms/1000)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// WriteHeader prints the objects of the chain, indented by depth.
func (t *Timeline) WriteHeader(w io.Writer) error {
	for _, o := range t.Objects {
		indent := ""
		if o.Depth > 0 {
			indent = strings.Repeat("  ", o.Depth)
		}
		if _, err := fmt.Fprintf(w, "%s%s (%s, uid %s)\n", indent, o.Title(), o.Role, o.UID); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%-8s %-12s %-28s %-32s %s\n", "REV", "TIME", "OBJECT", "ACTOR", "WHAT")
	return err
}

// WriteSteps prints the steps after pos, one line each plus an indented
// line per changed path, and returns the position of the last one printed.
func (t *Timeline) WriteSteps(w io.Writer, after store.Pos) (store.Pos, error) {
	last := after
	for i, s := range t.Steps {
		if !after.Less(s.Pos) {
			continue
		}
		mark := " "
		if i == t.Origin {
			mark = "*"
		}
		actor := s.Actor
		if actor == "" {
			actor = "-"
		}
		_, err := fmt.Fprintf(w, "%-8s %-12s %-28s %-32s %s%s\n", s.Pos, s.Time.UTC().Format("15:04:05.000"),
			t.Objects[s.Object].short(), actor, mark, t.Sentence(i))
		if err != nil {
			return last, err
		}
		for _, c := range s.Diff {
			if _, err := fmt.Fprintf(w, "%10s%s\n", "", c); err != nil {
				return last, err
			}
		}
		last = s.Pos
	}
	return last, nil
}
