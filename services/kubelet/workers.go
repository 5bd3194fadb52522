package kubelet

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// workers runs one goroutine per pod UID, as the kubelet's podWorkers do.
// A worker syncs its pod whenever it is kicked (a pod event, a change the
// relist saw in the runtime, a probe result) and at least every
// ResyncPeriod; syncs of one pod never overlap. A worker ends when its pod
// is gone from the API and from the runtime.
type workers struct {
	k *Kubelet

	mu      sync.Mutex
	ctx     context.Context // set by run; nil before
	byUID   map[types.UID]*worker
	pending []*worker // created before run started
	wg      sync.WaitGroup
}

// worker is one pod's worker.
type worker struct {
	uid       types.UID
	namespace string
	name      string
	kick      chan struct{}

	mu    sync.Mutex
	cause consumer.Cause
	// last is the status this worker last wrote and the resourceVersion
	// the write produced: newer than the cache until the event arrives.
	last   *corev1.PodStatus
	lastRV string
	// waiting holds the reason a container is not running, by container
	// name, when the runtime cannot tell (image pull, back-off, config).
	waiting map[string]corev1.ContainerStateWaiting
	// deleteSent is set once the final delete was made.
	deleteSent bool
}

func newWorkers(k *Kubelet) *workers {
	return &workers{k: k, byUID: map[types.UID]*worker{}}
}

// update reacts to a pod change from the cache: it records the cause (for
// changes other than the kubelet's own status writes) and kicks the
// pod's worker, starting one if needed.
func (ws *workers) update(pod, old *corev1.Pod, ev *events.Event) {
	var cause *consumer.Cause
	if ev != nil && (old == nil || !sameStatusOnly(old, pod)) {
		c := consumer.CauseOf(ev)
		cause = &c
	}
	ws.get(pod.UID, pod.Namespace, pod.Name, cause).poke()
}

// sameStatusOnly reports whether only the status (and resourceVersion)
// differ: the echo of a status write.
func sameStatusOnly(old, pod *corev1.Pod) bool {
	return old.DeletionTimestamp.Equal(pod.DeletionTimestamp) &&
		old.Generation == pod.Generation &&
		apiequality.Semantic.DeepEqual(old.Spec, pod.Spec)
}

// get returns the worker of uid, starting it if needed. cause, if not nil,
// becomes the worker's cause; a new worker has it before it starts, so its
// first write already carries it.
func (ws *workers) get(uid types.UID, namespace, name string, cause *consumer.Cause) *worker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.byUID[uid]
	if !ok {
		w = &worker{uid: uid, namespace: namespace, name: name, kick: make(chan struct{}, 1),
			waiting: map[string]corev1.ContainerStateWaiting{}}
		ws.byUID[uid] = w
	}
	if cause != nil {
		w.mu.Lock()
		w.cause = *cause
		w.mu.Unlock()
	}
	if !ok {
		// Started only now, with its cause.
		if ws.ctx == nil {
			ws.pending = append(ws.pending, w)
		} else {
			ws.start(w)
		}
	}
	return w
}

// kickUID kicks the worker of uid if there is one.
func (ws *workers) kickUID(uid types.UID) {
	ws.mu.Lock()
	w := ws.byUID[uid]
	ws.mu.Unlock()
	if w != nil {
		w.poke()
	}
}

func (ws *workers) has(uid types.UID) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	_, ok := ws.byUID[uid]
	return ok
}

func (w *worker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run starts the workers queued before it and waits until ctx ends and
// every worker has returned.
func (ws *workers) run(ctx context.Context) error {
	if err := ws.k.pods.WaitForSync(ctx); err != nil {
		return nil
	}
	ws.mu.Lock()
	ws.ctx = ctx
	for _, w := range ws.pending {
		ws.start(w)
	}
	ws.pending = nil
	ws.mu.Unlock()
	<-ctx.Done()
	ws.wg.Wait()
	return nil
}

// start runs w's goroutine; ws.mu is held.
func (ws *workers) start(w *worker) {
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		ws.loop(ws.ctx, w)
	}()
}

func (ws *workers) loop(ctx context.Context, w *worker) {
	k := ws.k
	log := k.log.With("pod", w.namespace+"/"+w.name, "uid", string(w.uid))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}
		next, finished := k.syncPod(ctx, w, log)
		if finished {
			ws.mu.Lock()
			delete(ws.byUID, w.uid)
			ws.mu.Unlock()
			k.probes.forgetPod(w.uid)
			k.crashes.forgetPrefix(string(w.uid) + "/")
			// A kick that raced with the exit (a new event for the same
			// UID) gets a fresh worker.
			select {
			case <-w.kick:
				if p, ok := k.pods.Get(w.namespace, w.name); ok && p.UID == w.uid {
					ws.get(w.uid, w.namespace, w.name, nil).poke()
				}
			default:
			}
			return
		}
		if next <= 0 || next > k.cfg.ResyncPeriod {
			next = k.cfg.ResyncPeriod
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// relistLoop polls the runtime every RelistPeriod (the kubelet's PLEG): a
// pod whose containers changed state gets its worker kicked, and a pod in
// the runtime that the API no longer has gets a worker that removes it.
func (k *Kubelet) relistLoop(ctx context.Context) error {
	if err := k.pods.WaitForSync(ctx); err != nil {
		return nil
	}
	prev := map[string]string{}
	t := time.NewTicker(k.cfg.RelistPeriod)
	defer t.Stop()
	for {
		pods, err := k.rt.ListPods(ctx)
		if err != nil {
			k.logErr(ctx, "relist", err)
		} else {
			cur := make(map[string]string, len(pods))
			for uid, ps := range pods {
				sig := signature(ps)
				cur[uid] = sig
				if prev[uid] != sig {
					k.kickOrAdopt(types.UID(uid), ps)
				}
			}
			prev = cur
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// kickOrAdopt kicks the worker of a pod the runtime holds, or starts one
// for a pod the kubelet has no worker for (after a restart, or a pod
// deleted from the API behind its back): that worker adopts it or removes
// it.
func (k *Kubelet) kickOrAdopt(uid types.UID, ps *container.PodStatus) {
	if k.workers.has(uid) {
		k.workers.kickUID(uid)
		return
	}
	k.workers.get(uid, ps.Namespace, ps.Name, nil).poke()
}

// signature summarises a pod's runtime state: any change of a sandbox or
// container state changes it.
func signature(ps *container.PodStatus) string {
	b := make([]byte, 0, 64)
	for _, sb := range ps.Sandboxes {
		b = append(b, sb.ID...)
		b = append(b, byte('0'+sb.State), ';')
	}
	for _, c := range ps.Containers {
		b = append(b, c.ID...)
		b = append(b, byte('0'+c.State), ';')
	}
	return string(b)
}
