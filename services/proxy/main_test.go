package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the Proxy's Run,
// the caches and the control plane of TestProxyFollowsTheLog included).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
