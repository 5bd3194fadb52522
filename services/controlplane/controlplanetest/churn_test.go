package controlplanetest

import (
	"math"
	"strings"
	"testing"
)

func TestParseChurn(t *testing.T) {
	before := `# HELP x
cairn_log_publisher_leader_elections_total 1
cairn_shard_partitions_acquired_total{group="controller-manager"} 32
cairn_shard_partitions_acquired_total{group="scheduler-default"} 4
cairn_log_publish_lag_seconds_bucket{le="0.5"} 10
cairn_log_publish_lag_seconds_bucket{le="1"} 10
cairn_log_publish_lag_seconds_bucket{le="+Inf"} 10
cairn_log_publish_lag_seconds_sum 1
cairn_apiserver_log_backpressure_seconds_count 3
cairn_apiserver_log_backpressure_seconds_sum 0.5
`
	after := `cairn_log_publisher_leader_elections_total 2
cairn_log_publisher_terms_lost_total 1
cairn_shard_partitions_acquired_total{group="controller-manager"} 33
cairn_shard_partitions_acquired_total{group="scheduler-default"} 4
cairn_shard_partitions_lost_total{group="controller-manager"} 1
cairn_log_publish_lag_seconds_bucket{le="0.5"} 108
cairn_log_publish_lag_seconds_bucket{le="1"} 109
cairn_log_publish_lag_seconds_bucket{le="+Inf"} 110
cairn_log_publish_lag_seconds_sum 31
cairn_apiserver_log_backpressure_seconds_count 10
cairn_apiserver_log_backpressure_seconds_sum 2
`
	b, err := ParseChurn(strings.NewReader(before))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseChurn(strings.NewReader(after))
	if err != nil {
		t.Fatal(err)
	}
	d := a.Sub(b)
	if d.PublisherElections != 1 || d.PublisherTermsLost != 1 || d.PartitionsAcquired != 1 || d.PartitionsLost != 1 ||
		d.HeldWrites != 7 || d.HeldSeconds != 1.5 {
		t.Fatalf("got %+v", d)
	}
	for _, tc := range []struct {
		q, want float64
	}{{0.5, 0.5}, {0.98, 0.5}, {0.99, 1}} {
		if got, n := d.LagQuantile(tc.q); got != tc.want || n != 100 {
			t.Errorf("quantile %v: got %v of %v, want %v of 100", tc.q, got, n, tc.want)
		}
	}
	if got, _ := d.LagQuantile(1); !math.IsInf(got, 1) {
		t.Errorf("quantile 1: got %v, want +Inf", got)
	}
}
