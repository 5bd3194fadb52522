package deployment

import (
	"os"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/replicaset"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// addReplicaSets adds to m the ReplicaSet controller the tests run: the
// real one, or with DEPLOY_TEST_FAKE_RS=1 the test-only fake
// (fakers_test.go, with caches of its own), to tell a bug here from one
// there.
func addReplicaSets(m *consumer.Manager, env *controlplanetest.Env) error {
	if os.Getenv("DEPLOY_TEST_FAKE_RS") != "" {
		f, err := newFakeReplicaSets(m.RestConfig(), env)
		if err != nil {
			return err
		}
		m.Add("fake-replicaset", f)
		return nil
	}
	_, err := replicaset.New(m, replicaset.Options{Workers: 4})
	return err
}
