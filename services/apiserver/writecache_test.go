package apiserver

import (
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// TestWriteCacheBounded: the write cache keeps the writeCacheSize keys put
// most recently first, the latest state of each, and forgets dropped keys.
func TestWriteCacheBounded(t *testing.T) {
	var c writeCache
	key := func(i int) string { return fmt.Sprintf("/registry/core/pods/ns/p%d", i) }
	for i := range writeCacheSize + 10 {
		c.put(storage.KV{Key: key(i), Revision: events.Revision(i + 1)})
	}
	if len(c.m) != writeCacheSize {
		t.Fatalf("%d entries, want %d", len(c.m), writeCacheSize)
	}
	for i := range 10 {
		if _, ok := c.get(key(i)); ok {
			t.Errorf("%s kept past the bound", key(i))
		}
	}
	c.put(storage.KV{Key: key(20), Revision: 99})
	if kv, ok := c.get(key(20)); !ok || kv.Revision != 99 {
		t.Errorf("%s: %+v %v, want revision 99", key(20), kv, ok)
	}
	if len(c.m) != writeCacheSize {
		t.Errorf("a put of a cached key changed the size to %d", len(c.m))
	}
	c.drop(key(20))
	if _, ok := c.get(key(20)); ok {
		t.Error("dropped key still cached")
	}
}
