package controlplanetest

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Churn is what the pipeline's own leases and the log did, read from the
// metrics of a control plane (events/publish's and events/consumer/shard's
// counters, the publish lag histogram): the counts a benchmark prints next
// to its figures, as a difference between two reads (Sub).
type Churn struct {
	// PublisherElections are terms won; PublisherTermsLost terms that
	// ended while the publisher ran.
	PublisherElections, PublisherTermsLost float64
	// Partitions acquired, released on purpose and lost, and failed
	// catch-ups, summed over the shard groups.
	PartitionsAcquired, PartitionsReleased, PartitionsLost, CatchUpFailures float64
	// HeldWrites were held by the apiserver's log gate, HeldSeconds in
	// all (cairn_apiserver_log_backpressure_seconds).
	HeldWrites, HeldSeconds float64
	// Lag is the publish lag histogram: cumulative counts by upper bound
	// (seconds), with its sum.
	lag    map[float64]float64
	lagSum float64
}

// ReadChurn reads the Churn counters of reg.
func ReadChurn(reg prometheus.Gatherer) (Churn, error) {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return ParseChurn(rec.Body)
}

// ParseChurn reads the Churn counters from a Prometheus text exposition
// (an apiserver's /metrics).
func ParseChurn(r io.Reader) (Churn, error) {
	c := Churn{lag: map[float64]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels := line[:i], ""
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, labels = name[:j], name[j:]
		}
		switch name {
		case "cairn_log_publisher_leader_elections_total":
			c.PublisherElections += v
		case "cairn_log_publisher_terms_lost_total":
			c.PublisherTermsLost += v
		case "cairn_shard_partitions_acquired_total":
			c.PartitionsAcquired += v
		case "cairn_shard_partitions_released_total":
			c.PartitionsReleased += v
		case "cairn_shard_partitions_lost_total":
			c.PartitionsLost += v
		case "cairn_shard_catchup_failures_total":
			c.CatchUpFailures += v
		case "cairn_apiserver_log_backpressure_seconds_count":
			c.HeldWrites += v
		case "cairn_apiserver_log_backpressure_seconds_sum":
			c.HeldSeconds += v
		case "cairn_log_publish_lag_seconds_sum":
			c.lagSum += v
		case "cairn_log_publish_lag_seconds_bucket":
			le := strings.TrimSuffix(strings.TrimPrefix(labels, `{le="`), `"}`)
			b, err := strconv.ParseFloat(le, 64)
			if le == "+Inf" {
				b, err = math.Inf(1), nil
			}
			if err == nil {
				c.lag[b] += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("controlplanetest: read metrics: %w", err)
	}
	return c, nil
}

// Sub is what happened between before and c.
func (c Churn) Sub(before Churn) Churn {
	d := Churn{
		PublisherElections: c.PublisherElections - before.PublisherElections,
		PublisherTermsLost: c.PublisherTermsLost - before.PublisherTermsLost,
		PartitionsAcquired: c.PartitionsAcquired - before.PartitionsAcquired,
		PartitionsReleased: c.PartitionsReleased - before.PartitionsReleased,
		PartitionsLost:     c.PartitionsLost - before.PartitionsLost,
		CatchUpFailures:    c.CatchUpFailures - before.CatchUpFailures,
		HeldWrites:         c.HeldWrites - before.HeldWrites,
		HeldSeconds:        c.HeldSeconds - before.HeldSeconds,
		lag:                map[float64]float64{},
		lagSum:             c.lagSum - before.lagSum,
	}
	for b, n := range c.lag {
		d.lag[b] = n - before.lag[b]
	}
	return d
}

// LagQuantile is the upper bound of the histogram bucket that holds the
// q-quantile of the publish lag, in seconds (+Inf beyond the last), and
// the number of events observed; 0, 0 without any.
func (c Churn) LagQuantile(q float64) (upper float64, count float64) {
	bounds := make([]float64, 0, len(c.lag))
	for b := range c.lag {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0, 0
	}
	total := c.lag[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0, 0
	}
	for _, b := range bounds {
		if c.lag[b] >= q*total {
			return b, total
		}
	}
	return math.Inf(1), total
}

// String is one line for a benchmark's log.
func (c Churn) String() string {
	p99, n := c.LagQuantile(0.99)
	p50, _ := c.LagQuantile(0.5)
	mean := 0.0
	if n > 0 {
		mean = c.lagSum / n
	}
	return fmt.Sprintf("publisher elections %.0f, terms lost %.0f; partitions acquired %.0f, released %.0f, lost %.0f, failed catch-ups %.0f; "+
		"publish lag of %.0f events: mean %.3fs, p50 <= %gs, p99 <= %gs; writes held for the log %.0f (%.1fs in all)",
		c.PublisherElections, c.PublisherTermsLost, c.PartitionsAcquired, c.PartitionsReleased, c.PartitionsLost, c.CatchUpFailures,
		n, mean, p50, p99, c.HeldWrites, c.HeldSeconds)
}
