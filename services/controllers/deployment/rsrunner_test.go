package deployment

import (
	"os"

	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/replicaset"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// newReplicaSetRunner is the ReplicaSet controller the tests run: the real
// one, or with DEPLOY_TEST_FAKE_RS=1 the test-only fake (fakers_test.go),
// to tell a bug here from one there.
func newReplicaSetRunner(cfg *rest.Config, env *controlplanetest.Env) (consumer.Runner, error) {
	if os.Getenv("DEPLOY_TEST_FAKE_RS") != "" {
		return newFakeReplicaSets(cfg, env)
	}
	return replicaset.New(replicaset.Config{RestConfig: cfg, JS: env.JS, Workers: 4, Log: testLog()})
}
