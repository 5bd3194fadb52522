package clusterstatus_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer/shard"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/clusterstatus"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// TestGather reads the status of an etcd member, a three-server NATS
// cluster with streams of 3 replicas, a running publisher and a sharded
// group of two replicas.
func TestGather(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server NATS cluster")
	}
	etcd := embeddedtest.StartEtcd(t)
	nc := embeddedtest.StartNATSCluster(t, 3)
	js, err := jetstream.New(nc.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, events.StreamConfig{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if err := events.ScaleStreams(ctx, js, events.StreamConfig{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	t.Cleanup(func() {
		stop()
		for range 3 {
			<-done
		}
	})
	pub := publish.NewPublisher(etcd.Client, js, publish.PublisherConfig{Identity: "server-a", SessionTTL: 2 * time.Second}, nil)
	go func() { _ = pub.Run(runCtx); done <- struct{}{} }()
	for _, id := range []string{"cm-a", "cm-b"} {
		s, err := shard.New(shard.Config{JS: js, Group: "controller-manager", Identity: id, Partitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = s.Run(runCtx); done <- struct{}{} }()
	}

	var st *clusterstatus.Status
	deadline := time.Now().Add(time.Minute)
	for {
		st, err = clusterstatus.Gather(ctx, etcd.Client, js)
		if err != nil {
			t.Fatal(err)
		}
		if st.Publisher.Identity != "" && len(st.Shards) == 1 && len(st.Shards[0].Owners) == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no publisher elected or partitions not all owned: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(st.Etcd) != 1 || !st.Etcd[0].Started || st.Etcd[0].Learner || !st.Etcd[0].Leader || st.Etcd[0].Err != "" {
		t.Errorf("etcd members = %+v, want one started leader", st.Etcd)
	}
	if st.Publisher.Identity != "server-a" {
		t.Errorf("publisher = %q, want server-a", st.Publisher.Identity)
	}
	for _, s := range st.Streams {
		if s.Replicas != 3 || s.Leader == "" || len(s.Peers) != 2 {
			t.Errorf("stream %s = %+v, want 3 replicas with a leader", s.Name, s)
		}
	}
	if got := st.NATSServers(); strings.Join(got, ",") != "n1,n2,n3" {
		t.Errorf("NATS servers = %v, want n1,n2,n3", got)
	}
	owners := map[string]int{}
	for _, o := range st.Shards[0].Owners {
		owners[o]++
	}
	if owners["cm-a"]+owners["cm-b"] != 8 {
		t.Errorf("partition owners = %v, want cm-a and cm-b only", st.Shards[0].Owners)
	}
	var out bytes.Buffer
	if err := st.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ETCD MEMBER", "started", events.Stream, "server-a", "controller_manager"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}
