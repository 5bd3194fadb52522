package storage

import (
	"context"
	"errors"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
)

// ErrClaimed is what a *ClaimError unwraps to.
var ErrClaimed = errors.New("storage: claimed key exists")

// Extra is what a write commits in its object's transaction besides the
// object and its write metadata: keys it claims, each only if nobody
// holds it yet (CreateRevision 0), and keys it releases. The allocation of
// a Service's cluster IP and node ports is committed this way, so that
// the allocation and the Service commit, or fail, together and two
// apiservers never hand out the same address. Claimed and released keys
// lie outside the registry, so they are never published on the log.
type Extra struct {
	Claims   []Claim
	Releases []string
}

// Claim is one key an Extra creates.
type Claim struct {
	Key   string
	Value []byte
}

// ClaimError is the error of a write whose object compare held but one of
// whose claims did not: Taken are the claimed keys that exist.
type ClaimError struct {
	Taken []string
}

func (e *ClaimError) Error() string { return ErrClaimed.Error() + ": " + strings.Join(e.Taken, ", ") }

// Unwrap makes errors.Is(err, ErrClaimed) hold.
func (e *ClaimError) Unwrap() error { return ErrClaimed }

// commit runs the transaction of one write: if cond (on the object) and
// every claim hold, write, the write metadata, the claims and the
// releases; otherwise it reads the object and, keys only, each claimed
// key (claimError and current read them back).
func (s *Store) commit(ctx context.Context, key string, cond clientv3.Cmp, write clientv3.Op, meta *events.WriteMeta, extra []Extra) (*clientv3.TxnResponse, error) {
	mop, err := metaOp(key, meta)
	if err != nil {
		return nil, err
	}
	cmps := []clientv3.Cmp{cond}
	then := []clientv3.Op{write, mop}
	els := []clientv3.Op{clientv3.OpGet(key)}
	for _, x := range extra {
		for _, c := range x.Claims {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.Key), "=", 0))
			then = append(then, clientv3.OpPut(c.Key, string(c.Value)))
			els = append(els, clientv3.OpGet(c.Key, clientv3.WithKeysOnly()))
		}
		for _, k := range x.Releases {
			then = append(then, clientv3.OpDelete(k))
		}
	}
	return s.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
}

// claimError lists the claimed keys a failed transaction found taken.
func claimError(resp *clientv3.TxnResponse) error {
	e := &ClaimError{}
	for _, r := range resp.Responses[1:] {
		if rr := r.GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			e.Taken = append(e.Taken, string(rr.Kvs[0].Key))
		}
	}
	if len(e.Taken) == 0 {
		// Taken and freed again between the compare and the read: the
		// caller tries again as after any conflict.
		return ErrConflict
	}
	return e
}
