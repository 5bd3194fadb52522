package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

const (
	namespace = "default"
	// labelKey carries a per-object counter; each acknowledged write's event
	// must show the value that write set.
	labelKey = "crash.cairn.dev/n"
)

// ack is one write the API acknowledged with a 2xx response.
type ack struct {
	verb string // create, update or delete
	key  string // etcd key of the object
	// rev is the resourceVersion the response returned (0 for delete: the
	// delete revision is not returned).
	rev   events.Revision
	label string // the label value the write set (create, update)
}

// object is one object a worker created (or may have created) and has not
// deleted yet.
type object struct {
	pod  bool
	name string
	n    int // the label counter of the last write
	cur  metav1.Object
}

func (o *object) key() string {
	res := "configmaps"
	if o.pod {
		res = "pods"
	}
	return storage.Key("", res, namespace, o.name)
}

// load is the concurrent write load: workers each create, update and delete
// their own objects, with names never reused, and retry through outages.
type load struct {
	t    *testing.T
	cs   *kubernetes.Clientset
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	acks   []ack
	errors int // failed attempts (expected while the apiserver is down)
	// unseen counts writes found committed although their answer was lost:
	// proof that kills hit writes in flight.
	unseen int
}

// tokenConfig reaches the apiserver at addr over plain HTTP as adminToken.
func tokenConfig(addr string) *rest.Config {
	return &rest.Config{Host: "http://" + addr, BearerToken: adminToken, QPS: -1, Burst: -1, Timeout: 10 * time.Second}
}

func startLoad(t *testing.T, cfg *rest.Config, workers int) *load {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := &load{t: t, cs: cs, stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.worker(w)
		}()
	}
	return l
}

// halt stops the workers after their current write (each finishes it, with
// retries, so no request is in flight afterwards) and waits for them.
func (l *load) halt() {
	close(l.stop)
	l.wg.Wait()
}

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *load) sawUnseen() {
	l.mu.Lock()
	l.unseen++
	l.mu.Unlock()
}

func (l *load) record(a ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

// retry runs f until it returns done, sleeping a little after each failure.
// After the load is stopped it still finishes, so that no write is in
// flight once halt returns; the apiserver is up by then.
func (l *load) retry(f func() (done bool)) {
	deadline := time.Now().Add(time.Minute)
	for !f() {
		l.mu.Lock()
		l.errors++
		l.mu.Unlock()
		if time.Now().After(deadline) {
			// Never hang the test; the write is simply not acknowledged.
			l.t.Errorf("a write kept failing for a minute")
			return
		}
		time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
	}
}

func (l *load) worker(w int) {
	ctx := context.Background()
	var live []*object
	seq := 0
	for !l.stopped() {
		switch r := rand.Float64(); {
		case len(live) < 3 || r < 0.35:
			o := &object{pod: seq%2 == 1, name: fmt.Sprintf("crash-w%d-%d", w, seq)}
			seq++
			if l.create(ctx, o) {
				live = append(live, o)
			}
		case r < 0.75:
			o := live[rand.IntN(len(live))]
			if !l.update(ctx, o) {
				live = remove(live, o)
			}
		default:
			o := live[rand.IntN(len(live))]
			l.delete(ctx, o)
			live = remove(live, o)
		}
	}
}

func remove(live []*object, o *object) []*object {
	for i, x := range live {
		if x == o {
			return append(live[:i], live[i+1:]...)
		}
	}
	return live
}

// create creates o; it reports whether o exists afterwards.
func (l *load) create(ctx context.Context, o *object) bool {
	label := strconv.Itoa(o.n)
	meta := metav1.ObjectMeta{Name: o.name, Namespace: namespace, Labels: map[string]string{labelKey: label}}
	exists := false
	l.retry(func() bool {
		var got metav1.Object
		var err error
		if o.pod {
			var p *corev1.Pod
			p, err = l.cs.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{ObjectMeta: meta,
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}, metav1.CreateOptions{})
			got = p
		} else {
			var c *corev1.ConfigMap
			c, err = l.cs.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta,
				Data: map[string]string{"worker": o.name}}, metav1.CreateOptions{})
			got = c
		}
		switch {
		case err == nil:
			l.record(ack{verb: "create", key: o.key(), rev: l.parseRev(got), label: label})
			o.cur, exists = got, true
			return true
		case apierrors.IsAlreadyExists(err):
			// An earlier attempt committed but its answer was lost.
			l.sawUnseen()
			exists = true
			return true
		}
		return false
	})
	return exists
}

// update sets the next label value on o; it reports whether o still exists.
func (l *load) update(ctx context.Context, o *object) bool {
	o.n++
	label := strconv.Itoa(o.n)
	exists := true
	l.retry(func() bool {
		if o.cur == nil {
			cur, err := l.get(ctx, o)
			if apierrors.IsNotFound(err) {
				exists = false
				return true
			}
			if err != nil {
				return false
			}
			o.cur = cur
		}
		labels := o.cur.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[labelKey] = label
		o.cur.SetLabels(labels)
		var got metav1.Object
		var err error
		if o.pod {
			var p *corev1.Pod
			p, err = l.cs.CoreV1().Pods(namespace).Update(ctx, o.cur.(*corev1.Pod), metav1.UpdateOptions{})
			got = p
		} else {
			var c *corev1.ConfigMap
			c, err = l.cs.CoreV1().ConfigMaps(namespace).Update(ctx, o.cur.(*corev1.ConfigMap), metav1.UpdateOptions{})
			got = c
		}
		switch {
		case err == nil:
			l.record(ack{verb: "update", key: o.key(), rev: l.parseRev(got), label: label})
			o.cur = got
			return true
		case apierrors.IsNotFound(err):
			exists = false
			return true
		}
		// A conflict means an earlier attempt committed unseen; any other
		// error may hide the same. Read the object again either way.
		if apierrors.IsConflict(err) {
			l.sawUnseen()
		}
		o.cur = nil
		return false
	})
	return exists
}

// delete deletes o.
func (l *load) delete(ctx context.Context, o *object) {
	l.retry(func() bool {
		var err error
		if o.pod {
			err = l.cs.CoreV1().Pods(namespace).Delete(ctx, o.name, metav1.DeleteOptions{})
		} else {
			err = l.cs.CoreV1().ConfigMaps(namespace).Delete(ctx, o.name, metav1.DeleteOptions{})
		}
		switch {
		case err == nil:
			l.record(ack{verb: "delete", key: o.key()})
			return true
		case apierrors.IsNotFound(err):
			// An earlier attempt committed but its answer was lost.
			l.sawUnseen()
			return true
		}
		return false
	})
}

func (l *load) get(ctx context.Context, o *object) (metav1.Object, error) {
	if o.pod {
		return l.cs.CoreV1().Pods(namespace).Get(ctx, o.name, metav1.GetOptions{})
	}
	return l.cs.CoreV1().ConfigMaps(namespace).Get(ctx, o.name, metav1.GetOptions{})
}

func (l *load) parseRev(o metav1.Object) events.Revision {
	rev, err := events.ParseRevision(o.GetResourceVersion())
	if err != nil || rev == 0 {
		l.t.Errorf("%s: acknowledged with resourceVersion %q", o.GetName(), o.GetResourceVersion())
	}
	return rev
}

// loadResult is what the load saw.
type loadResult struct {
	acks []ack
	// failed counts failed attempts, unseen writes that committed although
	// their answer was lost.
	failed, unseen int
}

func (l *load) result() loadResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return loadResult{acks: append([]ack(nil), l.acks...), failed: l.errors, unseen: l.unseen}
}
