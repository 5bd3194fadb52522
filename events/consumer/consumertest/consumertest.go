package consumertest

import (
	"log/slog"
	"testing"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// Manager builds a Manager that reaches env's apiserver as the user of
// token (controlplanetest.ControllerToken, SchedulerToken...) and reads
// env's log, logging to log (nil discards). It does not run it: register
// the controllers, then controlplanetest.Run or RunSynced it. tweak, if
// not nil, adjusts the options first (sharding, a user agent).
func Manager(t testing.TB, env *controlplanetest.Env, token string, log *slog.Logger, tweak func(*consumer.ManagerOptions)) *consumer.Manager {
	t.Helper()
	opts := consumer.ManagerOptions{RestConfig: env.ConfigFor(token), JS: env.JS, Log: log}
	if tweak != nil {
		tweak(&opts)
	}
	m, err := consumer.NewManager(opts)
	if err != nil {
		t.Fatalf("consumertest: new manager: %v", err)
	}
	return m
}
