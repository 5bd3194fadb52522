package history_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/audit"
	"github.com/cairn-dev/cairn/projections/history/historytest"
	"github.com/cairn-dev/cairn/projections/history/replay"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/timeline"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// benchEvents is the size of the synthetic log: 1,000,000 unless
// CAIRN_HISTORY_EVENTS says otherwise.
func benchEvents(b *testing.B) int {
	if s := os.Getenv("CAIRN_HISTORY_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkHistory builds a log of at least a million events in JetStream
// (pods created, bound, started and deleted by four users and the
// components, plus one Deployment rollout of 50 pods in the middle),
// ingests it into the projection, then measures a timeline of the
// Deployment, an audit query by user, and a full replay into a fresh data
// directory next to the raw etcd put rate of the same machine.
func BenchmarkHistory(b *testing.B) {
	total := benchEvents(b)
	js := historytest.StartLog(b)
	start := time.Now()
	published := publishLog(b, js, total)
	b.ReportMetric(float64(published), "events")
	b.Logf("log: %d events published in %s", published, time.Since(start).Round(time.Millisecond))

	st, err := store.Open(filepath.Join(b.TempDir(), "history.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start = time.Now()
	if err := store.NewIngester(st, js, store.IngestConfig{}).CatchUp(b.Context()); err != nil {
		b.Fatal(err)
	}
	ingest := time.Since(start)
	b.ReportMetric(float64(published)/ingest.Seconds(), "ingest-events/s")
	b.Logf("ingest: %s (%.0f events/s)", ingest.Round(time.Millisecond), float64(published)/ingest.Seconds())

	b.ReportMetric(measure(b, 20, func() int {
		var tl *timeline.Timeline
		err := st.View(func(tx *store.Tx) (err error) {
			tl, err = timeline.Build(tx, timeline.Options{Key: store.ObjKey{Group: "apps", Resource: "deployments", Namespace: "default", Name: "web"}})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return len(tl.Steps)
	}, "timeline"), "timeline-ms")
	b.ReportMetric(measure(b, 5, func() int {
		var res *audit.Result
		err := st.View(func(tx *store.Tx) (err error) {
			res, err = audit.Run(tx, audit.Query{User: "alice"})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return len(res.Entries)
	}, "audit by user"), "audit-ms")

	start = time.Now()
	cpu := embeddedtest.ProcessCPU()
	rep, err := replay.Run(b.Context(), replay.Config{JS: js, DataDir: filepath.Join(b.TempDir(), "replayed")})
	if err != nil {
		b.Fatal(err)
	}
	cpuPerEvent := float64((embeddedtest.ProcessCPU() - cpu).Microseconds()) / float64(rep.Events)
	b.ReportMetric(rep.EventsPerSecond, "replay-events/s")
	b.ReportMetric(cpuPerEvent, "replay-cpu-us/event")
	b.Logf("replay: %d events to revision %d in %s (%.0f events/s, %.0f µs of CPU per event, %d reordered, final sync %.1fs)",
		rep.Events, rep.Head, time.Since(start).Round(time.Millisecond), rep.EventsPerSecond, cpuPerEvent, rep.Reordered, rep.SyncSeconds)
	put := embeddedtest.PutRate(b, 20000, 64, 256)
	b.ReportMetric(put, "etcd-puts/s")
	b.ReportMetric(rep.EventsPerSecond/put, "replay/etcd-puts")
	b.Logf("raw etcd: %.0f puts/s (fsync, 64 writers, 256 B); replay/puts %.2f", put, rep.EventsPerSecond/put)
}

// publishLog publishes about total events, in chunks, with the rollout in
// the middle.
func publishLog(b *testing.B, js jetstream.JetStream, total int) int {
	g := historytest.NewGen()
	published, pod := 0, 0
	rollout := false
	for published < total {
		var evs []*events.Event
		for len(evs) < 20000 && published+len(evs) < total {
			evs = append(evs, g.PodLife("default", pod)...)
			pod++
		}
		if !rollout && published+len(evs) >= total/2 {
			evs = append(evs, g.Rollout("default", "web", "alice", 50)...)
			rollout = true
		}
		if err := historytest.Publish(b.Context(), js, evs); err != nil {
			b.Fatal(err)
		}
		published += len(evs)
	}
	return published
}

// measure runs fn runs times and returns the mean in milliseconds.
func measure(b *testing.B, runs int, fn func() int, what string) float64 {
	start := time.Now()
	var size int
	for range runs {
		size = fn()
	}
	ms := float64(time.Since(start).Microseconds()) / 1000 / float64(runs)
	b.Logf("%s: %.2f ms (mean of %d; %d results)", what, ms, runs, size)
	return ms
}
