package events

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// TestEnsureStreamsLeavesThemAlone: once the streams exist, the server's
// report of their configuration is what EnsureStreams would set, so a
// second call sends no update; a changed setting is updated.
func TestEnsureStreamsLeavesThemAlone(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureStreams(ctx, js, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, sc := range StreamConfigs(StreamConfig{}) {
		s, err := js.Stream(ctx, sc.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !sameStreamConfig(s.CachedInfo().Config, sc) {
			t.Errorf("%s: server's config %+v\nnot seen as %+v", sc.Name, s.CachedInfo().Config, sc)
		}
		changed := sc
		changed.Duplicates = time.Minute
		if sameStreamConfig(s.CachedInfo().Config, changed) {
			t.Errorf("%s: a changed duplicate window is seen as the same", sc.Name)
		}
	}
	if err := EnsureStreams(ctx, js, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
}
