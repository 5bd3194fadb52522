package proxy

import (
	"context"

	"sigs.k8s.io/knftables"

	"github.com/cairn-dev/cairn/services/netns"
)

// nsNFT is a knftables.Interface whose every call runs on a thread inside
// a network namespace: nft is forked from that thread, so it is born in
// the namespace and programs the namespace's nftables, and the netlink
// sockets knftables opens for listing are made there too.
type nsNFT struct {
	ns    string
	inner knftables.Interface
}

var _ knftables.Interface = (*nsNFT)(nil)

func (n *nsNFT) NewTransaction() *knftables.Transaction { return n.inner.NewTransaction() }

func (n *nsNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	return netns.Do(n.ns, func() error { return n.inner.Run(ctx, tx) })
}

func (n *nsNFT) Check(ctx context.Context, tx *knftables.Transaction) error {
	return netns.Do(n.ns, func() error { return n.inner.Check(ctx, tx) })
}

func (n *nsNFT) ListAll(ctx context.Context) (all map[string][]string, err error) {
	err = netns.Do(n.ns, func() error { all, err = n.inner.ListAll(ctx); return err })
	return all, err
}

func (n *nsNFT) List(ctx context.Context, objectType string) (names []string, err error) {
	err = netns.Do(n.ns, func() error { names, err = n.inner.List(ctx, objectType); return err })
	return names, err
}

func (n *nsNFT) ListRules(ctx context.Context, chain string) (rules []*knftables.Rule, err error) {
	err = netns.Do(n.ns, func() error { rules, err = n.inner.ListRules(ctx, chain); return err })
	return rules, err
}

func (n *nsNFT) ListElements(ctx context.Context, objectType, name string) (elems []*knftables.Element, err error) {
	err = netns.Do(n.ns, func() error { elems, err = n.inner.ListElements(ctx, objectType, name); return err })
	return elems, err
}

func (n *nsNFT) ListCounters(ctx context.Context) (cs []*knftables.Counter, err error) {
	err = netns.Do(n.ns, func() error { cs, err = n.inner.ListCounters(ctx); return err })
	return cs, err
}
