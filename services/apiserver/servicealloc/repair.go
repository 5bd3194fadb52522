package servicealloc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// RepairInterval is how often RunRepair runs, as kube's repair
// controllers (3 minutes).
const RepairInterval = 3 * time.Minute

// RepairResult is what one Repair found and did. Entries are allocation
// keys (Reclaimed, Restored) or kube's words for what it cannot settle.
type RepairResult struct {
	// Reclaimed are keys no Service held, deleted.
	Reclaimed []string
	// Restored are keys a Service's value lacked, created again.
	Restored []string
	// Problems are values held by two Services, or outside the ranges;
	// a user has to recreate one of the Services.
	Problems []string
}

type holding struct {
	svcKey string
	rev    int64
	svc    *corev1.Service
}

// Repair reads the Services and the allocation at one revision and makes
// them agree; see the package doc. Each delete and create is its own
// transaction with compares that make it a no-op if anything changed
// since the read, so Repair is safe to run from every apiserver at once.
func (a *Allocator) Repair(ctx context.Context) (RepairResult, error) {
	var res RepairResult
	svcs, err := a.cli.Get(ctx, storage.Key("", "services", "", ""), clientv3.WithPrefix())
	if err != nil {
		return res, fmt.Errorf("servicealloc: repair: list services: %w", err)
	}
	rev := svcs.Header.Revision
	var allocated []*mvccpb.KeyValue
	for _, prefix := range []string{IPPrefix, PortPrefix} {
		resp, err := a.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			return res, fmt.Errorf("servicealloc: repair: list %s: %w", prefix, err)
		}
		allocated = append(allocated, resp.Kvs...)
	}
	owner := map[string]string{} // allocation key -> the UID in its value
	for _, kv := range allocated {
		var h Holder
		_ = json.Unmarshal(kv.Value, &h)
		owner[string(kv.Key)] = h.UID
	}
	held := map[string]holding{}
	for _, kv := range svcs.Kvs {
		svc := &corev1.Service{}
		if err := json.Unmarshal(kv.Value, svc); err != nil {
			continue // not ours to judge; the apiserver cannot read it either
		}
		res.Problems = append(res.Problems, a.outOfRange(svc)...)
		for _, k := range a.Held(svc) {
			if first, dup := held[k]; dup {
				// The one the key names keeps it; the other is reported.
				loser := svc
				if owner[k] == string(svc.UID) {
					held[k], loser = holding{string(kv.Key), kv.ModRevision, svc}, first.svc
				}
				res.Problems = append(res.Problems, fmt.Sprintf("the %s for service %s/%s was assigned to multiple services; please recreate service",
					describe(k), loser.Namespace, loser.Name))
				continue
			}
			held[k] = holding{string(kv.Key), kv.ModRevision, svc}
		}
	}
	for _, kv := range allocated {
		k := string(kv.Key)
		if _, ok := held[k]; ok {
			continue
		}
		resp, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).Then(clientv3.OpDelete(k)).Commit()
		if err != nil {
			return res, fmt.Errorf("servicealloc: repair: reclaim %s: %w", k, err)
		}
		if resp.Succeeded {
			res.Reclaimed = append(res.Reclaimed, k)
		}
	}
	for k, h := range held {
		if _, ok := owner[k]; ok {
			continue
		}
		val, err := json.Marshal(Holder{Namespace: h.svc.Namespace, Name: h.svc.Name, UID: string(h.svc.UID)})
		if err != nil {
			return res, fmt.Errorf("servicealloc: repair: %w", err)
		}
		resp, err := a.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(k), "=", 0),
			clientv3.Compare(clientv3.ModRevision(h.svcKey), "=", h.rev),
		).Then(clientv3.OpPut(k, string(val))).Commit()
		if err != nil {
			return res, fmt.Errorf("servicealloc: repair: restore %s: %w", k, err)
		}
		if resp.Succeeded {
			res.Restored = append(res.Restored, k)
		}
	}
	return res, nil
}

// outOfRange reports the values of svc outside the ranges, in kube's
// repair controllers' words.
func (a *Allocator) outOfRange(svc *corev1.Service) []string {
	var out []string
	if schemas.NeedsClusterIP(svc) && !schemas.IsHeadless(svc) {
		for _, s := range svc.Spec.ClusterIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				if _, ok := a.IPs.Offset(ip); !ok {
					out = append(out, fmt.Sprintf("the cluster IP %s for service %s/%s is not within the service CIDR %s; please recreate",
						s, svc.Namespace, svc.Name, a.IPs))
				}
			}
		}
	}
	for _, p := range nodePorts(svc) {
		if !a.Ports.Contains(p) {
			out = append(out, fmt.Sprintf("the node port %d for service %s/%s is not within the port range %s; please recreate",
				p, svc.Namespace, svc.Name, a.Ports))
		}
	}
	return out
}

func describe(key string) string {
	if v, ok := strings.CutPrefix(key, IPPrefix); ok {
		return "cluster IP " + v
	}
	v, _ := strings.CutPrefix(key, PortPrefix)
	return "node port " + v
}

// RunRepair runs Repair now and then every interval (RepairInterval if
// 0) until ctx is done, logging what it did. A failed round is logged and
// tried again at the next.
func (a *Allocator) RunRepair(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	if interval <= 0 {
		interval = RepairInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		res, err := a.Repair(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("service allocation repair failed", "err", err)
		}
		for _, k := range res.Reclaimed {
			log.Info("service allocation repair: reclaimed a leaked allocation", "key", k)
		}
		for _, k := range res.Restored {
			log.Warn("service allocation repair: an allocated value had no key; repairing", "key", k)
		}
		for _, p := range res.Problems {
			log.Warn("service allocation repair: " + p)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
