package writes

import "testing"

func TestTracker(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		cached string
		want   bool
	}{
		{"nothing written", nil, "5", true},
		{"cache behind the write", []string{"7"}, "5", false},
		{"cache at the write", []string{"7"}, "7", true},
		{"cache past the write", []string{"7"}, "9", true},
		{"the newest write counts", []string{"9", "7"}, "8", false},
		{"unparsable revision counts as seen", []string{"7"}, "x", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New()
			for _, w := range tt.writes {
				tr.Wrote("ns/a", w)
			}
			if got := tr.Seen("ns/a", tt.cached); got != tt.want {
				t.Errorf("Seen = %v, want %v", got, tt.want)
			}
			if !tr.Seen("ns/b", "1") {
				t.Error("another key is affected")
			}
		})
	}
	tr := New()
	tr.Wrote("k", "5")
	if !tr.Seen("k", "5") || !tr.Seen("k", "1") {
		t.Error("a seen write is not forgotten")
	}
	tr.Wrote("k", "5")
	tr.Forget("k")
	if !tr.Seen("k", "1") {
		t.Error("Forget kept the write")
	}
}
