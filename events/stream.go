package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig is what differs between deployments of the two streams.
type StreamConfig struct {
	// Replicas is the number of JetStream replicas of each stream: 1 for the
	// embedded server, 3 for a NATS cluster. 0 means 1.
	Replicas int
	// KeepReplicas makes EnsureStreams keep the replicas of a stream that
	// exists (Replicas is then only the number a new stream starts with):
	// on servers that join into one cluster, the replicas follow the
	// cluster's size (ScaleStreams), and a server that starts must not
	// set them back.
	KeepReplicas bool
}

// Stream settings shared by every deployment.
const (
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id.
	DuplicateWindow = 2 * time.Minute
	// MaxEventSize is the largest event message: a 3 MiB object plus its
	// envelope, with room to spare.
	MaxEventSize = 8 << 20
)

// StreamConfigs returns the JetStream configuration of CAIRN and
// CAIRN_LEASES, in that order.
func StreamConfigs(cfg StreamConfig) []jetstream.StreamConfig {
	r := cfg.Replicas
	if r <= 0 {
		r = 1
	}
	return []jetstream.StreamConfig{
		{
			Name:        Stream,
			Description: "cairn: every committed change to an API object, in commit order",
			Subjects:    []string{SubjectPrefix + ".>"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxMsgs:     -1,
			MaxBytes:    -1,
			MaxAge:      0,
			Duplicates:  DuplicateWindow,
			MaxMsgSize:  MaxEventSize,
			AllowDirect: true,
			DenyDelete:  true,
			Replicas:    r,
		},
		{
			Name:              LeaseStream,
			Description:       "cairn: the latest change of every Lease",
			Subjects:          []string{LeaseSubjectPrefix + ".>"},
			Storage:           jetstream.FileStorage,
			Retention:         jetstream.LimitsPolicy,
			Discard:           jetstream.DiscardOld,
			MaxMsgs:           -1,
			MaxBytes:          -1,
			MaxMsgsPerSubject: 1,
			Duplicates:        DuplicateWindow,
			MaxMsgSize:        MaxEventSize,
			AllowDirect:       true,
			Replicas:          r,
		},
	}
}

// EnsureStreams creates the two streams, or updates them to the current
// configuration. It is idempotent and safe to call from every process that
// starts, also from several servers of one NATS cluster at once: a stream
// that already has the configuration is left alone (no update request: on
// a cluster whose meta leader is still placing a stream another server
// just created, nats-server may leave an update of it unanswered), each
// request is bounded by ensureTimeout and tried again while ctx lasts.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	for _, sc := range StreamConfigs(cfg) {
		if cfg.KeepReplicas {
			if s, err := js.Stream(ctx, sc.Name); err == nil {
				sc.Replicas = s.CachedInfo().Config.Replicas
			} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("events: ensure stream %s: %w", sc.Name, err)
			}
		}
		if err := ensureStream(ctx, js, sc); err != nil {
			return fmt.Errorf("events: ensure stream %s: %w", sc.Name, err)
		}
	}
	return nil
}

// ensureTimeout bounds one request of EnsureStreams.
const ensureTimeout = 10 * time.Second

func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	for {
		actx, cancel := context.WithTimeout(ctx, ensureTimeout)
		err := ensureStreamOnce(actx, js, sc)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		var ae *jetstream.APIError
		retry := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
			errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || (errors.As(err, &ae) && ae.Code >= 500)
		if !retry {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func ensureStreamOnce(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, sc)
		return err
	}
	if err != nil {
		return err
	}
	if sameStreamConfig(s.CachedInfo().Config, sc) {
		return nil
	}
	_, err = js.UpdateStream(ctx, sc)
	return err
}

// sameStreamConfig tells whether the stream's configuration (as the server
// reports it, with its defaults filled in) has what want sets.
func sameStreamConfig(got, want jetstream.StreamConfig) bool {
	limit := func(v int64) int64 { // 0 and -1 both mean no limit
		if v <= 0 {
			return -1
		}
		return v
	}
	return slices.Equal(got.Subjects, want.Subjects) && got.Description == want.Description &&
		got.Storage == want.Storage && got.Retention == want.Retention && got.Discard == want.Discard &&
		limit(got.MaxMsgs) == limit(want.MaxMsgs) && limit(got.MaxBytes) == limit(want.MaxBytes) &&
		limit(got.MaxMsgsPerSubject) == limit(want.MaxMsgsPerSubject) && got.MaxAge == want.MaxAge &&
		got.Duplicates == want.Duplicates && got.MaxMsgSize == want.MaxMsgSize &&
		got.AllowDirect == want.AllowDirect && got.DenyDelete == want.DenyDelete && got.Replicas == want.Replicas
}

// StreamEnd is the last message of one stream.
type StreamEnd struct {
	Seq uint64   // 0 if the stream is empty
	Pos Position // position of the last message
	ID  string   // Nats-Msg-Id of the last message, "" if unknown
}

// LogEnd is where the log ends: the last message of both streams.
type LogEnd struct {
	Streams map[string]StreamEnd
}

// Last is the position of the newest event on either stream.
func (t LogEnd) Last() Position {
	var p Position
	for _, s := range t.Streams {
		if p.Less(s.Pos) {
			p = s.Pos
		}
	}
	return p
}

// ReadLogEnd reads the last message of both streams.
func ReadLogEnd(ctx context.Context, js jetstream.JetStream) (LogEnd, error) {
	t := LogEnd{Streams: map[string]StreamEnd{}}
	for _, name := range []string{Stream, LeaseStream} {
		st, err := readStreamEnd(ctx, js, name)
		if err != nil {
			return LogEnd{}, err
		}
		t.Streams[name] = st
	}
	return t, nil
}

func readStreamEnd(ctx context.Context, js jetstream.JetStream, name string) (StreamEnd, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return StreamEnd{}, fmt.Errorf("events: stream %s: %w", name, err)
	}
	// On CAIRN_LEASES a newer message for the same lease removes the last
	// one between the info and the get: read both again.
	for attempt := 0; ; attempt++ {
		info, err := s.Info(ctx)
		if err != nil {
			return StreamEnd{}, fmt.Errorf("events: stream %s info: %w", name, err)
		}
		st := info.State
		if st.Msgs == 0 {
			// An empty (or purged) stream continues from LastSeq.
			return StreamEnd{Seq: st.LastSeq}, nil
		}
		seq := st.LastSeq
		deleted := false
		if attempt >= 5 {
			deleted = true
			// The last messages were deleted: the newest one left tells the
			// position, the stream's LastSeq the sequence to expect.
			for seq > st.FirstSeq {
				if _, err := GetMsgFromLeader(ctx, js, name, seq); err == nil {
					break
				}
				seq--
			}
		}
		msg, err := GetMsgFromLeader(ctx, js, name, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) && attempt < 5 {
			continue
		}
		if err != nil {
			return StreamEnd{}, fmt.Errorf("events: stream %s last message %d: %w", name, seq, err)
		}
		pos, err := MsgPosition(msg.Header)
		if err != nil {
			return StreamEnd{}, fmt.Errorf("events: stream %s seq %d: %w", name, seq, err)
		}
		t := StreamEnd{Seq: st.LastSeq, Pos: pos}
		if !deleted {
			t.ID = msg.Header.Get(nats.MsgIdHdr)
		}
		return t, nil
	}
}

// MsgPosition reads the position of a stored event from its headers.
func MsgPosition(h nats.Header) (Position, error) {
	if id := h.Get(nats.MsgIdHdr); id != "" {
		return ParseMsgID(id)
	}
	rev, err := ParseRevision(h.Get(MsgHeaderRevision))
	if err != nil {
		return Position{}, err
	}
	if rev == 0 {
		return Position{}, errors.New("events: message without revision")
	}
	return Position{Rev: rev}, nil
}

// LastPublishedRevision is the revision of the newest event on the log (the
// larger of the last message of CAIRN and of CAIRN_LEASES), 0 if both are
// empty. Every change before it has been published, and so has it unless a
// transaction that changed several objects was cut short (see "Exactly once"
// in the package documentation).
func LastPublishedRevision(ctx context.Context, js jetstream.JetStream) (Revision, error) {
	t, err := ReadLogEnd(ctx, js)
	if err != nil {
		return 0, err
	}
	return t.Last().Rev, nil
}

// WaitPublished returns once every committed change up to rev is on the log.
// rev should be the revision of an API write (its resourceVersion): the
// publisher publishes in revision order across both streams, so once the
// log holds rev it holds everything before it.
func WaitPublished(ctx context.Context, js jetstream.JetStream, rev Revision) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		last, err := LastPublishedRevision(ctx, js)
		if err != nil {
			return err
		}
		if last >= rev {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("events: wait for revision %d (log at %d): %w", rev, last, ctx.Err())
		case <-t.C:
		}
	}
}

// ReplicasFor is the number of replicas of the streams on a JetStream
// cluster of peers servers: 3 once there are three or more (a majority
// survives one loss), else 1. Two servers keep R1: an R2 stream stops
// when either server is gone.
func ReplicasFor(peers int) int {
	if peers >= 3 {
		return 3
	}
	return 1
}

// ScaleStreams sets the replicas of both streams to cfg.Replicas (a
// stream update: JetStream adds or removes the peers and copies the
// messages to the new ones) and returns once every replica of each stream
// is current with its leader, so that a leader elected afterwards has the
// whole stream. Streams that already have that many replicas are left as
// they are. It returns early with ctx's error.
func ScaleStreams(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	for _, sc := range StreamConfigs(cfg) {
		if err := ScaleStream(ctx, js, sc.Name, sc.Replicas); err != nil {
			return err
		}
	}
	return nil
}

// ScaleStream is ScaleStreams for the one stream name (any stream, e.g.
// the one behind a KV bucket, KV_<bucket>).
func ScaleStream(ctx context.Context, js jetstream.JetStream, name string, replicas int) error {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("events: scale stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("events: scale stream %s: %w", name, err)
	}
	if info.Config.Replicas != replicas {
		cur := info.Config
		cur.Replicas = replicas
		if _, err := js.UpdateStream(ctx, cur); err != nil {
			return fmt.Errorf("events: scale stream %s to %d replicas: %w", name, replicas, err)
		}
	}
	return waitReplicasCurrent(ctx, js, name, replicas)
}

// waitReplicasCurrent polls the stream's cluster info until it has a
// leader and want-1 other replicas, all current and without lag.
func waitReplicasCurrent(ctx context.Context, js jetstream.JetStream, name string, want int) error {
	for {
		s, err := js.Stream(ctx, name)
		if err == nil {
			info := s.CachedInfo()
			if replicasCurrent(info, want) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("events: stream %s: waiting for %d current replicas: %w", name, want, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func replicasCurrent(info *jetstream.StreamInfo, want int) bool {
	if want <= 1 {
		return true
	}
	c := info.Cluster
	if c == nil || c.Leader == "" || len(c.Replicas) != want-1 {
		return false
	}
	for _, r := range c.Replicas {
		if !r.Current || r.Offline || r.Lag != 0 {
			return false
		}
	}
	return true
}
