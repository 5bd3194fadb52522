package clusterstatus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/embedded"
)

// Status is a snapshot of the cluster's servers.
type Status struct {
	Etcd      []EtcdMember
	Streams   []Stream
	Publisher Publisher
	// Shards are the partition owners of each sharded consumer group.
	Shards []ShardGroup
	// Servers and Meta are the servers recorded and the JetStream meta
	// group, on servers joined into one cluster (from an apiserver's
	// controlplane.ServersPath); nil otherwise.
	Servers []controlplane.ServerRecord
	Meta    *embedded.NATSMeta
}

// EtcdMember is one member of the etcd cluster.
type EtcdMember struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	// Started is false for a member added but not yet running (etcd
	// knows its name only once it has started).
	Started bool
	Learner bool
	Leader  bool
	// Revision is the member's current revision, 0 if it did not answer.
	Revision int64
	// Err is why the member did not answer a status request, "" if it did.
	Err string
}

// Stream is one of the log's streams.
type Stream struct {
	Name     string
	Replicas int // configured
	Leader   string
	LastSeq  uint64
	Peers    []Peer // the replicas other than the leader
}

// Peer is a stream replica that is not the leader.
type Peer struct {
	Name    string
	Current bool
	Offline bool
	Lag     uint64 // raft entries behind the leader
}

// Publisher is the elected log publisher.
type Publisher struct {
	// Identity is the elected publisher's, "" if none is elected.
	Identity string
	// Head is etcd's revision, Published the last revision on the log;
	// Head-Published is the publisher's lag in revisions (writes to keys
	// that are no API objects count too).
	Head, Published events.Revision
}

// ShardGroup is one sharded consumer group and its partitions' owners.
type ShardGroup struct {
	Bucket string
	// Owners maps a partition to the identity of the replica leasing it.
	Owners map[int]string
}

// Gather reads the status. It fails only if etcd or JetStream cannot be
// read at all; a member that does not answer is reported in its Err.
func Gather(ctx context.Context, cli *clientv3.Client, js jetstream.JetStream) (*Status, error) {
	st := &Status{}
	if err := st.gatherEtcd(ctx, cli); err != nil {
		return nil, err
	}
	for _, name := range []string{events.Stream, events.LeaseStream} {
		s, err := stream(ctx, js, name)
		if err != nil {
			return nil, err
		}
		st.Streams = append(st.Streams, s)
	}
	if err := st.gatherPublisher(ctx, cli, js); err != nil {
		return nil, err
	}
	if err := st.gatherShards(ctx, js); err != nil {
		return nil, err
	}
	return st, nil
}

func (st *Status) gatherEtcd(ctx context.Context, cli *clientv3.Client) error {
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("clusterstatus: etcd members: %w", err)
	}
	var leader uint64
	for _, m := range ml.Members {
		em := EtcdMember{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
			Started: m.Name != "", Learner: m.IsLearner}
		if len(m.ClientURLs) > 0 {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			sr, err := cli.Status(sctx, m.ClientURLs[0])
			cancel()
			if err != nil {
				em.Err = err.Error()
			} else {
				em.Revision = sr.Header.Revision
				leader = sr.Leader
			}
		}
		st.Etcd = append(st.Etcd, em)
	}
	for i := range st.Etcd {
		st.Etcd[i].Leader = leader != 0 && st.Etcd[i].ID == leader
	}
	return nil
}

func stream(ctx context.Context, js jetstream.JetStream, name string) (Stream, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return Stream{}, fmt.Errorf("clusterstatus: stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	out := Stream{Name: name, Replicas: info.Config.Replicas, LastSeq: info.State.LastSeq}
	if c := info.Cluster; c != nil {
		out.Leader = c.Leader
		for _, r := range c.Replicas {
			out.Peers = append(out.Peers, Peer{Name: r.Name, Current: r.Current, Offline: r.Offline, Lag: r.Lag})
		}
	}
	return out, nil
}

func (st *Status) gatherPublisher(ctx context.Context, cli *clientv3.Client, js jetstream.JetStream) error {
	// An election needs a session to read its leader; a read of the
	// oldest key under the prefix is the same without one.
	resp, err := cli.Get(ctx, publish.DefaultPublisherElection+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return fmt.Errorf("clusterstatus: publisher election: %w", err)
	}
	if len(resp.Kvs) > 0 {
		st.Publisher.Identity = string(resp.Kvs[0].Value)
	}
	st.Publisher.Head = events.Revision(resp.Header.Revision)
	last, err := events.LastPublishedRevision(ctx, js)
	if err != nil {
		return fmt.Errorf("clusterstatus: %w", err)
	}
	st.Publisher.Published = last
	return nil
}

// shardBucketPrefix is what package shard names its buckets with.
const shardBucketPrefix = "cairn_shards_"

func (st *Status) gatherShards(ctx context.Context, js jetstream.JetStream) error {
	names := js.KeyValueStoreNames(ctx)
	var buckets []string
	for n := range names.Name() {
		if strings.HasPrefix(n, shardBucketPrefix) {
			buckets = append(buckets, n)
		}
	}
	if err := names.Error(); err != nil {
		return fmt.Errorf("clusterstatus: buckets: %w", err)
	}
	slices.Sort(buckets)
	for _, b := range buckets {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			return fmt.Errorf("clusterstatus: bucket %s: %w", b, err)
		}
		g := ShardGroup{Bucket: b, Owners: map[int]string{}}
		lister, err := kv.ListKeysFiltered(ctx, "p.>")
		if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
			return fmt.Errorf("clusterstatus: bucket %s: %w", b, err)
		}
		if err == nil {
			for k := range lister.Keys() {
				p, err := strconv.Atoi(strings.TrimPrefix(k, "p."))
				if err != nil {
					continue
				}
				e, err := kv.Get(ctx, k)
				if err != nil {
					continue // released since the listing
				}
				g.Owners[p] = string(e.Value())
			}
		}
		st.Shards = append(st.Shards, g)
	}
	return nil
}

// Write prints the status as `cairn cluster status` shows it.
func (st *Status) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ETCD MEMBER\tPEER URLS\tCLIENT URLS\tSTATE\tLEADER\tREVISION")
	for _, m := range st.Etcd {
		state := "started"
		switch {
		case !m.Started:
			state = "unstarted"
		case m.Learner:
			state = "learner"
		}
		if m.Err != "" {
			state += " (unreachable)"
		}
		name := m.Name
		if name == "" {
			name = strconv.FormatUint(m.ID, 16)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\n", name, strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ","), state, m.Leader, m.Revision)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "STREAM\tREPLICAS\tLEADER\tLAST SEQ\tOTHER REPLICAS (current, lag)")
	for _, s := range st.Streams {
		var peers []string
		for _, p := range s.Peers {
			state := "current"
			switch {
			case p.Offline:
				state = "offline"
			case !p.Current:
				state = "catching up"
			}
			peers = append(peers, fmt.Sprintf("%s (%s, lag %d)", p.Name, state, p.Lag))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", s.Name, s.Replicas, s.Leader, s.LastSeq, strings.Join(peers, ", "))
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "NATS servers (carrying the streams):\t%s\n", strings.Join(st.NATSServers(), ", "))
	if st.Meta != nil {
		fmt.Fprintln(tw)
		fmt.Fprintf(tw, "NATS PEER\tMETA LEADER\tSTATE\tLAG\n")
		for _, p := range st.Meta.Peers {
			state := "current"
			switch {
			case p.Offline:
				state = "offline"
			case !p.Current:
				state = "catching up"
			}
			fmt.Fprintf(tw, "%s\t%v\t%s\t%d\n", p.Name, p.Leader, state, p.Lag)
		}
		fmt.Fprintf(tw, "JetStream meta leader:\t%s\n", st.Meta.Leader)
	}
	pub := st.Publisher.Identity
	if pub == "" {
		pub = "(none elected)"
	}
	fmt.Fprintf(tw, "log publisher:\t%s, log at revision %d, etcd at %d (lag %d revisions)\n",
		pub, st.Publisher.Published, st.Publisher.Head, st.Publisher.Head-st.Publisher.Published)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "SHARD GROUP\tOWNER\tPARTITIONS")
	for _, g := range st.Shards {
		byOwner := map[string][]int{}
		for p, o := range g.Owners {
			byOwner[o] = append(byOwner[o], p)
		}
		owners := make([]string, 0, len(byOwner))
		for o := range byOwner {
			owners = append(owners, o)
		}
		sort.Strings(owners)
		group := strings.TrimPrefix(g.Bucket, shardBucketPrefix)
		for _, o := range owners {
			ps := byOwner[o]
			slices.Sort(ps)
			fmt.Fprintf(tw, "%s\t%s\t%d: %s\n", group, o, len(ps), joinInts(ps))
		}
	}
	return tw.Flush()
}

// NATSServers are the servers that lead or replicate a stream.
func (st *Status) NATSServers() []string {
	var out []string
	for _, s := range st.Streams {
		if s.Leader != "" && !slices.Contains(out, s.Leader) {
			out = append(out, s.Leader)
		}
		for _, p := range s.Peers {
			if !slices.Contains(out, p.Name) {
				out = append(out, p.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func joinInts(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}
