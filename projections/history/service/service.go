// Package service runs the history projection as one cairn service: the
// store (a bbolt file), its ingester from the log, the latency histograms
// and the HTTP handler of the API and page, for `cairn up` (or a process of
// its own) to run with Run(ctx).
package service

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-dev/cairn/projections/history/latency"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/web"
)

// Prefix is the path the handler serves under.
const Prefix = "/history/"

// Config configures the service.
type Config struct {
	// Path of the store file, e.g. <data-dir>/history.db.
	Path string
	JS   jetstream.JetStream
	// Rebuild starts the store again from the oldest event of the log.
	Rebuild bool
	// NoSync skips fsync of the store (tests); ingest resumes from the log.
	NoSync bool
	// Registerer receives the latency histograms; nil registers none.
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Service is an open history projection.
type Service struct {
	Store   *store.Store
	Latency *latency.Observer
	in      *store.Ingester
}

// New opens the store and prepares ingest; nothing runs until Run.
func New(cfg Config) (*Service, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	lat, err := latency.New(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(cfg.Path, store.Options{Rebuild: cfg.Rebuild, NoSync: cfg.NoSync, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	in := store.NewIngester(st, cfg.JS, store.IngestConfig{Observers: []store.Observer{lat}, Log: cfg.Log})
	return &Service{Store: st, Latency: lat, in: in}, nil
}

// Handler serves the API and the page under Prefix; mount it with
// mux.Handle(Prefix, h).
func (s *Service) Handler() http.Handler { return web.Handler(s.Store, Prefix) }

// Run ingests the log until ctx is done, then closes the store and
// returns nil.
func (s *Service) Run(ctx context.Context) error {
	defer s.Store.Close()
	return s.in.Run(ctx)
}
