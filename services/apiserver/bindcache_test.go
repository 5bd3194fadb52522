package apiserver

import (
	"fmt"
	"testing"
)

// TestBindCacheBounded: the binding cache keeps at most maxCachedNodes
// entries, and an entry stays the same while it is cached.
func TestBindCacheBounded(t *testing.T) {
	var c bindCache
	first := c.entry("node-0")
	if c.entry("node-0") != first {
		t.Fatal("a second lookup made a new entry")
	}
	for i := range 2 * maxCachedNodes {
		c.entry(fmt.Sprintf("node-%d", i))
	}
	c.mu.Lock()
	n := len(c.nodes)
	c.mu.Unlock()
	if n != maxCachedNodes {
		t.Errorf("%d entries cached, want %d", n, maxCachedNodes)
	}
}
