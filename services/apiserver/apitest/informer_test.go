package apitest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// requestCounter counts the pod collection reads an informer makes.
type requestCounter struct {
	next http.RoundTripper
	// lists are GETs of the collection that are not watches; watchLists are
	// watches with sendInitialEvents=true (client-go's streaming list);
	// watches counts every watch.
	lists, watchLists, watches atomic.Int64
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods") {
		q := r.URL.Query()
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			c.watches.Add(1)
			if q.Get("sendInitialEvents") == "true" {
				c.watchLists.Add(1)
			}
		default:
			c.lists.Add(1)
		}
	}
	return c.next.RoundTrip(r)
}

// noWatchList wraps a ListWatch so the reflector lists and then watches
// instead of streaming the initial list.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// observed records what an informer's handlers saw.
type observed struct {
	mu  sync.Mutex
	rvs map[string]bool
	// last is the last resourceVersion seen per pod, to check order.
	last      map[string]int64
	errs      []string
	tombstone int
}

func newObserved() *observed {
	return &observed{rvs: map[string]bool{}, last: map[string]int64{}}
}

func (o *observed) see(obj any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			o.tombstone++
		}
		o.errs = append(o.errs, fmt.Sprintf("unexpected object %T", obj))
		return
	}
	rv, err := strconv.ParseInt(pod.ResourceVersion, 10, 64)
	if err != nil {
		o.errs = append(o.errs, fmt.Sprintf("pod %s: bad resourceVersion %q", pod.Name, pod.ResourceVersion))
		return
	}
	if rv <= o.last[pod.Name] {
		o.errs = append(o.errs, fmt.Sprintf("pod %s: resourceVersion %d after %d", pod.Name, rv, o.last[pod.Name]))
	}
	o.last[pod.Name] = rv
	o.rvs[pod.ResourceVersion] = true
}

func (o *observed) missing(want []string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, rv := range want {
		if !o.rvs[rv] {
			out = append(out, rv)
		}
	}
	return out
}

// TestInformerBurst runs a SharedInformer on pods through a burst of 1,000
// writes from several goroutines: it must see every write, in order per
// object, after exactly one initial list and with no relist.
func TestInformerBurst(t *testing.T) {
	env := controlplanetest.Start(t)
	tests := []struct {
		name string
		// watchList uses client-go's default streaming list
		// (sendInitialEvents); otherwise the reflector lists, then watches.
		watchList bool
	}{
		{name: "list then watch", watchList: false},
		{name: "streaming list", watchList: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("burst-%d", i)
			runInformerBurst(t, env, ns, tt.watchList)
		})
	}
}

func runInformerBurst(t *testing.T, env *controlplanetest.Env, ns string, watchList bool) {
	const (
		writers      = 8
		writesPerGor = 125 // 1,000 writes in all
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Objects that exist before the informer starts come with the initial
	// list.
	for i := range 5 {
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, testPod(fmt.Sprintf("pre-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	counter := &requestCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var inf cache.SharedIndexInformer
	if watchList {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		inf = f.Core().V1().Pods().Informer()
	} else {
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().Pods(ns).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().Pods(ns).Watch(ctx, o)
			},
		}
		inf = cache.NewSharedIndexInformer(noWatchList{lw}, &corev1.Pod{}, 0, cache.Indexers{})
	}
	obs := newObserved()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    obs.see,
		UpdateFunc: func(_, obj any) { obs.see(obj) },
		DeleteFunc: obs.see,
	}); err != nil {
		t.Fatal(err)
	}
	infCtx, stop := context.WithCancel(ctx)
	var infDone sync.WaitGroup
	infDone.Go(func() { inf.RunWithContext(infCtx) })
	defer func() { stop(); infDone.Wait() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	// The burst: each writer creates pods, updates them and deletes every
	// other one, recording the resourceVersion every write produced.
	var mu sync.Mutex
	var wrote []string
	record := func(rv string) {
		mu.Lock()
		wrote = append(wrote, rv)
		mu.Unlock()
	}
	errc := make(chan error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range writers {
		wg.Go(func() { errc <- burstWriter(ctx, env.Client, ns, g, writesPerGor, record) })
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(wrote) != writers*writesPerGor {
		t.Fatalf("made %d writes, want %d", len(wrote), writers*writesPerGor)
	}
	t.Logf("%d writes in %v", len(wrote), time.Since(start).Round(time.Millisecond))

	deadline := time.Now().Add(30 * time.Second)
	var miss []string
	for {
		if miss = obs.missing(wrote); len(miss) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(miss) > 0 {
		t.Fatalf("informer missed %d of %d writes, e.g. resourceVersion %s", len(miss), len(wrote), miss[0])
	}

	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range list.Items {
		want[p.Name] = p.ResourceVersion
	}
	got := map[string]string{}
	for _, o := range inf.GetStore().List() {
		p := o.(*corev1.Pod)
		got[p.Name] = p.ResourceVersion
	}
	if len(got) != len(want) {
		t.Errorf("informer holds %d pods, list has %d", len(got), len(want))
	}
	for name, rv := range want {
		if got[name] != rv {
			t.Errorf("pod %s: informer has resourceVersion %q, list %q", name, got[name], rv)
		}
	}

	obs.mu.Lock()
	for _, e := range obs.errs {
		t.Error(e)
	}
	if obs.tombstone > 0 {
		t.Errorf("%d deletes arrived as DeletedFinalStateUnknown (a relist)", obs.tombstone)
	}
	obs.mu.Unlock()

	lists, watchLists, watches := counter.lists.Load(), counter.watchLists.Load(), counter.watches.Load()
	t.Logf("lists %d, streaming lists %d, watches %d", lists, watchLists, watches)
	if lists+watchLists != 1 {
		t.Errorf("informer made %d lists and %d streaming lists, want exactly one in all", lists, watchLists)
	}
	if watchList && watchLists != 1 {
		t.Errorf("streaming list not used (%d lists)", lists)
	}
	if watches != 1 {
		t.Errorf("informer opened %d watches, want 1 (the watch broke during the burst)", watches)
	}
}

// burstWriter makes n writes to its own pods: create, update twice, and for
// every other pod a delete.
func burstWriter(ctx context.Context, cs kubernetes.Interface, ns string, g, n int, record func(string)) error {
	pods := cs.CoreV1().Pods(ns)
	done := 0
	for k := 0; done < n; k++ {
		name := fmt.Sprintf("w%d-%d", g, k)
		p, err := pods.Create(ctx, testPod(name), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		record(p.ResourceVersion)
		done++
		for u := 0; u < 2 && done < n; u++ {
			p.Labels["step"] = strconv.Itoa(u)
			if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update %s: %w", name, err)
			}
			record(p.ResourceVersion)
			done++
		}
		if k%2 == 1 || done >= n {
			continue
		}
		obj, err := cs.CoreV1().RESTClient().Delete().Namespace(ns).Resource("pods").Name(name).Do(ctx).Get()
		if err != nil {
			return fmt.Errorf("delete %s: %w", name, err)
		}
		del, ok := obj.(*corev1.Pod)
		if !ok {
			return fmt.Errorf("delete %s returned %T, want the pod", name, obj)
		}
		record(del.ResourceVersion)
		done++
	}
	return nil
}
