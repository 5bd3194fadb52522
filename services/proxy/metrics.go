package proxy

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus metrics, named as kube-proxy's where
// kube has one (pkg/proxy/metrics).
type metrics struct {
	syncDuration *prometheus.HistogramVec
	failures     prometheus.Counter
	lastSync     prometheus.Gauge
	programmed   *prometheus.GaugeVec
}

// syncBuckets are kube-proxy's for its sync duration (1 ms to about 16 s).
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubeproxy_sync_proxy_rules_duration_seconds",
			Help:    "SyncProxyRules latency in seconds, by kind of sync (full: the whole table; partial: the changed Services only).",
			Buckets: syncBuckets,
		}, []string{"sync"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
			Help: "Cumulative proxy nftables sync failures.",
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time proxy rules were successfully synced.",
		}),
		programmed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cairn_proxy_rules_programmed",
			Help: "Objects the Services put in the proxy's nftables table, by kind (chains, rules, sets, elements).",
		}, []string{"kind"}),
	}
	if reg == nil {
		return m, nil
	}
	// A proxy started again in the same process (cairn up restarting its
	// node) takes over the collectors its predecessor registered.
	var err error
	if m.syncDuration, err = register(reg, m.syncDuration); err != nil {
		return nil, err
	}
	if m.failures, err = register(reg, m.failures); err != nil {
		return nil, err
	}
	if m.lastSync, err = register(reg, m.lastSync); err != nil {
		return nil, err
	}
	if m.programmed, err = register(reg, m.programmed); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg, or returns the equal collector already
// registered there.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
		if old, ok := are.ExistingCollector.(C); ok {
			return old, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("proxy: register metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) synced(res SyncResult) {
	kind := "partial"
	if res.Full {
		kind = "full"
	}
	m.syncDuration.WithLabelValues(kind).Observe(res.Duration.Seconds())
	m.lastSync.SetToCurrentTime()
	c := res.Programmed
	m.programmed.WithLabelValues("chains").Set(float64(c.Chains))
	m.programmed.WithLabelValues("rules").Set(float64(c.Rules))
	m.programmed.WithLabelValues("sets").Set(float64(c.Sets))
	m.programmed.WithLabelValues("elements").Set(float64(c.Elements))
}
