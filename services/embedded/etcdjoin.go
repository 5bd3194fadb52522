package embedded

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A member joins a running cluster as etcd's runtime-reconfiguration guide
// and k3s do it: it is first added as a learner (MemberAddAsLearner: it
// receives the log but does not vote, so a slow or broken newcomer never
// costs the cluster its quorum), starts with --initial-cluster-state
// existing, and is promoted to a voting member once it has caught up with
// the leader (MemberPromote, which etcd refuses until then).

// JoinEtcd adds a learner named name with peerURL to the cluster cli
// reaches and returns the --initial-cluster the new member starts with
// (every member, the new one included) and its id. A member already
// known by that peer URL (an earlier attempt that died before its member
// started) is reused instead of added twice.
func JoinEtcd(ctx context.Context, cli *clientv3.Client, name, peerURL string) (initialCluster string, id uint64, err error) {
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("embedded: etcd members: %w", err)
	}
	members := ml.Members
	found := false
	for _, m := range members {
		if slices.Contains(m.PeerURLs, peerURL) {
			if m.Name != "" && m.Name != name {
				return "", 0, fmt.Errorf("embedded: etcd peer URL %s belongs to member %s", peerURL, m.Name)
			}
			id, found = m.ID, true
		} else if m.Name == name {
			return "", 0, fmt.Errorf("embedded: an etcd member named %s exists (at %s): remove it first", name, strings.Join(m.PeerURLs, ","))
		}
	}
	if !found {
		resp, err := addLearner(ctx, cli, peerURL)
		if err != nil {
			return "", 0, fmt.Errorf("embedded: add etcd learner %s: %w", name, err)
		}
		id, members = resp.Member.ID, resp.Members
	}
	var parts []string
	for _, m := range members {
		n := m.Name
		if m.ID == id {
			n = name
		}
		if n == "" {
			// Another member added but not started yet: etcd refuses to
			// start with it unnamed in the initial cluster, and will learn
			// of it from the others.
			continue
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ","), id, nil
}

// addLearner adds a learner, waiting while etcd refuses for an unhealthy
// cluster: a member that joined moments ago counts as active only after
// etcd's health interval (5s), and etcd adds no member before.
func addLearner(ctx context.Context, cli *clientv3.Client, peerURL string) (*clientv3.MemberAddResponse, error) {
	for {
		resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
		if err == nil || !errors.Is(err, rpctypes.ErrUnhealthy) && !strings.Contains(err.Error(), "unhealthy cluster") {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// PromoteEtcd promotes the learner id to a voting member once it has
// caught up, retrying while etcd says it is not ready, until ctx is done.
// Promoting a member that already votes is no error.
func PromoteEtcd(ctx context.Context, cli *clientv3.Client, id uint64) error {
	for {
		_, err := cli.MemberPromote(ctx, id)
		notReady := errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || errors.Is(err, rpctypes.ErrUnhealthy) ||
			err != nil && (strings.Contains(err.Error(), "in sync with leader") || strings.Contains(err.Error(), "unhealthy cluster"))
		switch {
		case err == nil, !notReady && errors.Is(err, rpctypes.ErrMemberNotLearner):
			return nil
		case !notReady:
			return fmt.Errorf("embedded: promote etcd member %x: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: promote etcd member %x: %w", id, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// PromoteSelf promotes the member e to a voter, through the other
// members, if it is still a learner: a server that joined is promoted once
// it has caught up, and one killed before that is promoted when it
// restarts. A voter returns at once.
func (e *Etcd) PromoteSelf(ctx context.Context) error {
	srv := e.e.Server
	if !srv.IsLearner() {
		return nil
	}
	var eps []string
	for _, m := range srv.Cluster().Members() {
		if m.ID != srv.MemberID() && !m.IsLearner {
			eps = append(eps, m.ClientURLs...)
		}
	}
	if len(eps) == 0 {
		return errors.New("embedded: promote etcd learner: no voting member with a client URL")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("embedded: promote etcd learner: %w", err)
	}
	defer cli.Close()
	if err := PromoteEtcd(ctx, cli, uint64(srv.MemberID())); err != nil {
		return err
	}
	// The promotion is committed once the leader answers, but this member
	// serves clients only once it has applied it itself: until then every
	// request to it is refused with "rpc not supported for learner".
	for srv.IsLearner() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: promote etcd learner: promoted, but not yet applied here: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// ErrNoEtcdMember means no etcd member has the name given.
var ErrNoEtcdMember = errors.New("embedded: no such etcd member")

// RemoveEtcdMember removes the member named name from the cluster cli
// reaches (etcd's member remove), returning ErrNoEtcdMember if there is
// none. A member added but never started has no name; give its peer URL
// instead of a name to remove it.
func RemoveEtcdMember(ctx context.Context, cli *clientv3.Client, name string) error {
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("embedded: etcd members: %w", err)
	}
	for _, m := range ml.Members {
		if m.Name == name || (m.Name == "" && slices.Contains(m.PeerURLs, name)) {
			if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
				return fmt.Errorf("embedded: remove etcd member %s: %w", name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("embedded: etcd member %s: %w", name, ErrNoEtcdMember)
}
