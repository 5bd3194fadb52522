package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// testChain is a chain on a fresh etcd that records the revisions it
// lands.
type testChain struct {
	*chain
	cli    *clientv3.Client
	head   int64
	landed []int64
}

func newTestChain(t *testing.T) *testChain {
	t.Helper()
	e := embeddedtest.StartEtcd(t)
	tc := &testChain{cli: e.Client}
	c, head, err := newChain(t.Context(), e.Client, func(_ context.Context, x *txn) error {
		tc.landed = append(tc.landed, x.rev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tc.chain, tc.head = c, int64(head)
	t.Cleanup(c.close)
	return tc
}

// txn makes the transaction of revision head+i: a pad for every third,
// otherwise a write of one object and the metadata.
func (tc *testChain) txn(i int) *txn {
	rev := tc.head + int64(i)
	if i%3 == 0 {
		return &txn{rev: rev, pad: true, ops: []clientv3.Op{clientv3.OpPut(PadKey, "")}}
	}
	return &txn{rev: rev, ops: []clientv3.Op{clientv3.OpPut(fmt.Sprintf("/registry/core/pods/default/p-%d", i), "{}"),
		clientv3.OpPut(events.MetaKey, fmt.Sprint(i))}}
}

// wantLanded is revisions head+1 .. head+n.
func (tc *testChain) wantLanded(t *testing.T, n int) {
	t.Helper()
	var want []int64
	for i := 1; i <= n; i++ {
		want = append(want, tc.head+int64(i))
	}
	if !slices.Equal(tc.landed, want) {
		t.Errorf("landed %v, want %v", tc.landed, want)
	}
}

// TestChainInOrder pipelines more transactions than the window and checks
// that each landed on its revision, in order.
func TestChainInOrder(t *testing.T) {
	tc := newTestChain(t)
	const n = 5 * 64
	for i := 1; i <= n; i++ {
		if err := tc.push(t.Context(), tc.txn(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	tc.wantLanded(t, n)
	for i := 1; i <= n; i++ {
		if i%3 == 0 {
			continue
		}
		r, err := tc.cli.Get(t.Context(), fmt.Sprintf("/registry/core/pods/default/p-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 1 || r.Kvs[0].ModRevision != tc.head+int64(i) {
			t.Errorf("p-%d: %v, want mod revision %d", i, r.Kvs, tc.head+int64(i))
		}
	}
}

// TestChainReorder makes etcd apply the second transaction before the
// first, and the third after both: the second and the third fail their
// compares, and the chain commits them again, in order.
func TestChainReorder(t *testing.T) {
	tc := newTestChain(t)
	ctx := t.Context()
	t1, t2, t3 := tc.txn(1), tc.txn(2), tc.txn(3)
	for _, x := range []*txn{t1, t2, t3} {
		tc.link(x)
	}
	for _, x := range []*txn{t2, t1, t3} {
		tc.submit(x)
		<-x.done
	}
	if t2.ok || !t1.ok || t3.ok {
		t.Fatalf("applied out of order: ok %v %v %v, want true false false", t1.ok, t2.ok, t3.ok)
	}
	tc.inflight = []*txn{t1, t2, t3}
	if err := tc.flush(ctx); err != nil {
		t.Fatal(err)
	}
	tc.wantLanded(t, 3)
	if tc.reordered != 1 {
		t.Errorf("reordered %d, want 1", tc.reordered)
	}
}

// TestChainDiverged writes to the destination behind the chain's back:
// the next transaction must fail with ErrDiverged, not land elsewhere.
func TestChainDiverged(t *testing.T) {
	for _, key := range []string{"/registry/core/pods/default/intruder", events.MetaKey, PadKey} {
		t.Run(key, func(t *testing.T) {
			tc := newTestChain(t)
			ctx := t.Context()
			if err := tc.push(ctx, tc.txn(1)); err != nil {
				t.Fatal(err)
			}
			if err := tc.flush(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.cli.Put(ctx, key, "x"); err != nil {
				t.Fatal(err)
			}
			for i := 2; i <= 4; i++ {
				if err := tc.push(ctx, tc.txn(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.flush(ctx); !errors.Is(err, ErrDiverged) {
				t.Fatalf("flush: %v, want ErrDiverged", err)
			}
			tc.wantLanded(t, 1)
		})
	}
}
