// Package eventrecord writes core/v1 Events for cairn's components (the
// scheduler, the controllers and the kubelet), as client-go's record
// package does for Kubernetes' own: what `kubectl describe` lists under
// Events and `kubectl get events` prints.
//
// An event first goes through client-go's EventCorrelator: an event
// identical to one already written for the same object bumps that event's
// count (a PATCH instead of a new object); more than 10 similar ones (same
// object and reason) within 10 minutes are combined into one; a per-object
// spam filter (25, then one per 5 minutes) caps the rest. It then waits in
// a queue for one of the Recorder's writers (an object's events always go
// to the same writer, so its creates and patches stay in order). The
// writers use a client of their own, limited by NewClient (50 writes per
// second by default, as the event clients of kube-scheduler and the
// kubelet): in a burst, events queue and are written as fast as that
// allows, so that they never take more than that share of the apiserver
// from the component's real work. Only when the queue is full is a new
// event dropped (Dropped).
//
// Every event is written with the context it was recorded with, less its
// cancellation: a consumer's reconcile context carries the cause of the
// reconcile (events/consumer.WithCause), so the Event is linked on the log
// to what the component was reacting to.
package eventrecord

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/cairn-dev/cairn/events/consumer"
)

// Defaults of NewClient: kube-scheduler's and the kubelet's event rate.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
)

// ControllerQPS and ControllerBurst are the controllers' event rate: each
// of kube-controller-manager's controllers writes through a client limited
// to --kube-api-qps 20 and --kube-api-burst 30.
const (
	ControllerQPS   = 20
	ControllerBurst = 30
)

const (
	writers   = 4
	queueSize = 1 << 15
	noteLimit = 1024
)

// NewClient is the client a Recorder writes through: rc limited to qps
// writes per second with bursts of burst (0 takes DefaultQPS and
// DefaultBurst; a negative qps does not limit), sending the causation
// headers of each write's context.
func NewClient(rc *rest.Config, qps float32, burst int) (kubernetes.Interface, error) {
	erc := rest.CopyConfig(rc)
	erc.QPS, erc.Burst = qps, burst
	if erc.QPS == 0 {
		erc.QPS = DefaultQPS
	}
	if erc.Burst <= 0 {
		erc.Burst = DefaultBurst
	}
	cs, err := consumer.NewClient(consumer.WrapConfig(erc), writers+1)
	if err != nil {
		return nil, fmt.Errorf("eventrecord: client: %w", err)
	}
	return cs, nil
}

// NewForController is the Recorder of one of the controller manager's
// controllers: cfg names it, and it writes through its own client limited
// to qps and burst, 0 taking ControllerQPS and ControllerBurst.
func NewForController(rc *rest.Config, cfg Config, qps float32, burst int) (*Recorder, error) {
	if qps == 0 {
		qps = ControllerQPS
	}
	if burst <= 0 {
		burst = ControllerBurst
	}
	client, err := NewClient(rc, qps, burst)
	if err != nil {
		return nil, err
	}
	return New(client, cfg), nil
}

// ForManager is the Recorder of a component of m's process (cfg names it),
// writing through m's REST config with a client of its own limited as
// NewForController's. m runs it; the component's second request gets the
// same Recorder.
func ForManager(m *consumer.Manager, cfg Config, qps float32, burst int) (*Recorder, error) {
	return consumer.Shared(m, "eventrecord/"+cfg.Component+"/"+cfg.Instance, func() (*Recorder, error) {
		if cfg.Log == nil {
			cfg.Log = m.Log()
		}
		return NewForController(m.RestConfig(), cfg, qps, burst)
	})
}

// Config names the component that records.
type Config struct {
	// Component is the events' source.component and reportingController,
	// as Kubernetes names them: "kubelet", "deployment-controller",
	// "replicaset-controller", "default-scheduler".
	Component string
	// Instance is source.host and reportingInstance: the node of a
	// kubelet, the replica of a controller or scheduler.
	Instance string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Recorder records Events. Build it with New; Run writes them.
type Recorder struct {
	client     kubernetes.Interface
	source     corev1.EventSource
	now        func() time.Time
	log        *slog.Logger
	correlator *record.EventCorrelator
	// spam is the correlator's per-object spam filter, applied before it:
	// see New.
	spam    *record.EventSourceObjectSpamFilter
	queues  [writers]chan queued
	written atomic.Int64
	dropped atomic.Int64
}

type queued struct {
	ctx   context.Context
	ev    *corev1.Event
	patch []byte
}

// New returns a Recorder writing through client (see NewClient).
func New(client kubernetes.Interface, cfg Config) *Recorder {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	clock := passiveClock{cfg.Now}
	// The correlator computes a patch for every repeat of an event it has
	// seen, and only then asks its spam filter, which drops most repeats
	// of a burst: a ReplicaSet scaled to 100 passes 25 of its 100
	// SuccessfulCreate events. The same filter (25 per object, then one
	// per 5 minutes), asked first, spares the correlator the other 75. The
	// correlator's own filter then never drops: it sees only what this one
	// let through. One difference from client-go: a dropped repeat does
	// not raise the count of the event it repeats.
	r := &Recorder{client: client, source: corev1.EventSource{Component: cfg.Component, Host: cfg.Instance}, now: cfg.Now,
		log: cfg.Log, correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clock}),
		spam: record.NewEventSourceObjectSpamFilter(spamCacheSize, spamBurst, spamQPS, clock, spamKey)}
	for i := range r.queues {
		r.queues[i] = make(chan queued, queueSize/writers)
	}
	return r
}

// passiveClock adapts Config.Now for the correlator.
type passiveClock struct{ now func() time.Time }

func (c passiveClock) Now() time.Time                  { return c.now() }
func (c passiveClock) Since(t time.Time) time.Duration { return c.now().Sub(t) }

// Written is the number of events created or patched so far.
func (r *Recorder) Written() int64 { return r.written.Load() }

// Dropped is the number of events dropped because the queue was full.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Run writes queued events until ctx ends; the events still queued then
// are not written.
func (r *Recorder) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, q := range r.queues {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-q:
					r.write(ctx, e)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// write creates the event, or patches the one it repeats (and creates it if
// that one is gone), as client-go's recordEvent; then tells the correlator
// what the server holds.
func (r *Recorder) write(ctx context.Context, e queued) {
	var out *corev1.Event
	var err error
	evs := r.client.CoreV1().Events(e.ev.Namespace)
	if e.patch != nil {
		out, err = evs.Patch(e.ctx, e.ev.Name, types.StrategicMergePatchType, e.patch, metav1.PatchOptions{})
	}
	if e.patch == nil || apierrors.IsNotFound(err) {
		e.ev.ResourceVersion = ""
		out, err = evs.Create(e.ctx, e.ev, metav1.CreateOptions{})
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("event not written", "reason", e.ev.Reason, "object", e.ev.InvolvedObject.Name, "err", err)
		}
		return
	}
	r.written.Add(1)
	r.correlator.UpdateState(out)
}

// Ref is the reference an Event makes to obj, an object of kind gvk.
func Ref(obj metav1.Object, gvk schema.GroupVersionKind) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: obj.GetNamespace(),
		Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()}
}

// Event queues an Event of type typ (corev1.EventTypeNormal or
// EventTypeWarning) about the object ref. action is the Event's action
// (what was done or failed), empty for none: an Event with an action (and
// a Config.Instance) also carries eventTime, as those kube-scheduler
// writes; one without is in the form client-go's record package writes
// (firstTimestamp, lastTimestamp). ctx carries the cause.
func (r *Recorder) Event(ctx context.Context, ref corev1.ObjectReference, typ, reason, action, msg string) {
	now := r.now()
	t := metav1.NewTime(now)
	ns := ref.Namespace
	if ns == "" {
		// Events about cluster-scoped objects (nodes) live in "default".
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject: ref, Reason: reason, Message: msg, Type: typ, Source: r.source,
		FirstTimestamp: t, LastTimestamp: t, Count: 1,
		ReportingController: r.source.Component, ReportingInstance: r.source.Host,
	}
	if action != "" && r.source.Host != "" {
		// The newer form, which the apiserver validates as
		// events.k8s.io's: it requires an action and an instance, and
		// takes at most noteLimit bytes of message.
		ev.EventTime, ev.Action = metav1.NewMicroTime(now), action
		if len(ev.Message) > noteLimit {
			ev.Message = ev.Message[:noteLimit]
		}
	}
	if r.spam.Filter(ev) {
		return
	}
	res, err := r.correlator.EventCorrelate(ev)
	if err != nil {
		r.log.Debug("event correlation", "reason", reason, "object", ref.Name, "err", err)
	}
	if res == nil || res.Skip {
		return
	}
	e := queued{ctx: context.WithoutCancel(ctx), ev: res.Event}
	if res.Event.Count > 1 {
		e.patch = res.Patch
	}
	select {
	case r.queues[writerOf(ref)] <- e:
	default:
		r.dropped.Add(1)
		r.log.Debug("event dropped: queue full", "reason", reason, "object", ref.Name)
	}
}

// Eventf is Event with a formatted message.
func (r *Recorder) Eventf(ctx context.Context, ref corev1.ObjectReference, typ, reason, action, format string, args ...any) {
	r.Event(ctx, ref, typ, reason, action, fmt.Sprintf(format, args...))
}

// The correlator's spam filter settings (client-go's defaults).
const (
	spamCacheSize = 4096
	spamBurst     = 25
	spamQPS       = 1. / 300.
)

// spamKey is client-go's spam key: one bucket per source, object and type.
func spamKey(ev *corev1.Event) string {
	o := ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, ev.Type}, "")
}

// writerOf spreads objects over the writers.
func writerOf(ref corev1.ObjectReference) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ref.Namespace + "/" + ref.Name))
	return int(h.Sum32() % writers)
}
