package apiserver

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type requestMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRequestMetrics(reg prometheus.Registerer) (*requestMetrics, error) {
	m := &requestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out by verb, group, resource, subresource and HTTP code.",
		}, []string{"verb", "group", "resource", "subresource", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds by verb, group, resource and subresource.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"verb", "group", "resource", "subresource"}),
	}
	for _, c := range []prometheus.Collector{m.total, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("apiserver: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *requestMetrics) observe(info requestInfo, code int, d time.Duration) {
	verb := info.Verb
	if !info.IsResourceRequest {
		verb = "nonresource"
	}
	m.total.WithLabelValues(verb, info.APIGroup, info.Resource, info.Subresource, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(verb, info.APIGroup, info.Resource, info.Subresource).Observe(d.Seconds())
}
