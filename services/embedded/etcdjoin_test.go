package embedded_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/services/embedded"
)

// TestEtcdJoinAsLearner grows a one-member cluster to three the way a
// joining server does: each newcomer is added as a learner, starts on the
// initial cluster JoinEtcd returns and is promoted once caught up (the
// last by PromoteSelf, after which it serves writes at once). Then
// every member votes, and a write through the first is read through the
// last.
func TestEtcdJoinAsLearner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := startMember(t, ctx, "a", "")
	cli := client(t, first.Endpoint())
	if _, err := cli.Put(ctx, "/before", "1"); err != nil {
		t.Fatal(err)
	}
	var last *embedded.Etcd
	for _, name := range []string{"b", "c"} {
		peer := "http://" + freePort(t)
		initial, id, err := embedded.JoinEtcd(ctx, cli, name, peer)
		if err != nil {
			t.Fatalf("join %s: %v", name, err)
		}
		ml, err := cli.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !isLearner(ml, id) {
			t.Fatalf("member %s not added as a learner: %+v", name, ml.Members)
		}
		last = startMemberAt(t, ctx, name, initial, peer)
		if name == "b" {
			if err := embedded.PromoteEtcd(ctx, cli, id); err != nil {
				t.Fatalf("promote %s: %v", name, err)
			}
			continue
		}
		// As a joining server does: it promotes itself and then writes
		// through its own member at once, which etcd refuses ("rpc not
		// supported for learner") until the member has applied its
		// promotion.
		if err := last.PromoteSelf(ctx); err != nil {
			t.Fatalf("promote %s: %v", name, err)
		}
		if _, err := client(t, last.Endpoint()).Put(ctx, "/promoted", name); err != nil {
			t.Fatalf("write through %s right after its promotion: %v", name, err)
		}
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 3 {
		t.Fatalf("members = %d, want 3", len(ml.Members))
	}
	for _, m := range ml.Members {
		if m.IsLearner || m.Name == "" {
			t.Errorf("member %x (%q): learner %v, want a started voter", m.ID, m.Name, m.IsLearner)
		}
	}
	if _, err := cli.Put(ctx, "/after", "2"); err != nil {
		t.Fatal(err)
	}
	lc := client(t, last.Endpoint())
	for _, k := range []string{"/before", "/after"} {
		resp, err := lc.Get(ctx, k) // linearizable: through the leader
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s through the last member: %v %v", k, resp, err)
		}
	}
	// The same name again is refused, not added twice.
	if _, _, err := embedded.JoinEtcd(ctx, cli, "b", "http://"+freePort(t)); err == nil {
		t.Fatal("a second member named b was added")
	}
}

func isLearner(ml *clientv3.MemberListResponse, id uint64) bool {
	for _, m := range ml.Members {
		if m.ID == id {
			return m.IsLearner
		}
	}
	return false
}

func startMember(t *testing.T, ctx context.Context, name, initial string) *embedded.Etcd {
	return startMemberAt(t, ctx, name, initial, "")
}

func startMemberAt(t *testing.T, ctx context.Context, name, initial, peerURL string) *embedded.Etcd {
	t.Helper()
	cfg := embedded.EtcdConfig{Dir: t.TempDir(), Name: name, InitialCluster: initial, NoFsync: true}
	if peerURL != "" {
		cfg.PeerAddr = peerURL[len("http://"):]
	}
	e, err := embedded.StartEtcd(ctx, cfg)
	if err != nil {
		t.Fatalf("start member %s: %v", name, err)
	}
	t.Cleanup(e.Close)
	return e
}

func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr())
}
