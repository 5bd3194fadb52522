package shard

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Sharder's counters, each labelled with its group. In one
// process the sharders of several groups (the controller manager's, the
// scheduler's) share the collectors.
type metrics struct {
	acquired, released, lost, catchUpFailed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, group string) *metrics {
	vec := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"group"})
		if reg != nil {
			if err := reg.Register(v); err != nil {
				var are prometheus.AlreadyRegisteredError
				if errors.As(err, &are) {
					if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
						v = existing
					}
				}
			}
		}
		return v.WithLabelValues(group)
	}
	return &metrics{
		acquired: vec("cairn_shard_partitions_acquired_total",
			"Partition leases acquired by this process, by group (every acquisition after the first of each partition is a move)."),
		released: vec("cairn_shard_partitions_released_total",
			"Partition leases given up on purpose by this process (handed over, shut down, a failed catch-up), by group."),
		lost: vec("cairn_shard_partitions_lost_total",
			"Partition leases this process lost (expired before it renewed them, or taken by another replica), by group."),
		catchUpFailed: vec("cairn_shard_catchup_failures_total",
			"Catch-ups after an acquisition that failed (the partition was then released), by group."),
	}
}
