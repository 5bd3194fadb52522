package apitest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// seen is one watch event, reduced.
type seen struct {
	typ  watch.EventType
	name string
	rv   string
}

func (s seen) String() string { return fmt.Sprintf("%s %s@%s", s.typ, s.name, s.rv) }

// collect reads n events from w, failing after timeout.
func collect(t *testing.T, w watch.Interface, n int, timeout time.Duration) []seen {
	t.Helper()
	var out []seen
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			m, err := metaOf(ev.Object)
			if err != nil {
				t.Fatalf("event %s: %v", ev.Type, err)
			}
			out = append(out, seen{ev.Type, m.GetName(), m.GetResourceVersion()})
		case <-deadline:
			t.Fatalf("got %d of %d events: %v", len(out), n, out)
		}
	}
	return out
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

// quiet fails if w delivers anything within d.
func quiet(t *testing.T, w watch.Interface, d time.Duration) {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		m, _ := metaOf(ev.Object)
		t.Errorf("unexpected event %s %v", ev.Type, m)
	case <-time.After(d):
	}
}

func equalSeen(a, b []seen) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWatch covers watches from a resourceVersion, from "" and with
// selectors.
func TestWatch(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := env.Client.CoreV1().Pods("w")
	start, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A script of writes; want is what a watch of the namespace sees.
	var want []seen
	a, err := pods.Create(ctx, testPod("a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, seen{watch.Added, "a", a.ResourceVersion})
	a.Labels["v"] = "2"
	if a, err = pods.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = append(want, seen{watch.Modified, "a", a.ResourceVersion})
	// A write elsewhere is not seen.
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, testPod("elsewhere"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := pods.Create(ctx, testPod("b"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, seen{watch.Added, "b", b.ResourceVersion})
	del, err := env.Client.CoreV1().RESTClient().Delete().Namespace("w").Resource("pods").Name("a").Do(ctx).Get()
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, seen{watch.Deleted, "a", del.(*corev1.Pod).ResourceVersion})
	if b, err = pods.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"other"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want = append(want, seen{watch.Modified, "b", b.ResourceVersion})

	from := []struct {
		name string
		rv   string
		want []seen
	}{
		{"from the list before the writes", start.ResourceVersion, want},
		{"from the first write", want[0].rv, want[1:]},
		{"from the third write", want[2].rv, want[3:]},
	}
	for _, tt := range from {
		t.Run(tt.name, func(t *testing.T) {
			w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: tt.rv})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if got := collect(t, w, len(tt.want), 10*time.Second); !equalSeen(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
			quiet(t, w, 300*time.Millisecond)
		})
	}

	for _, rv := range []string{"", "0"} {
		t.Run(fmt.Sprintf("resourceVersion %q starts with the current state", rv), func(t *testing.T) {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var wantInit []seen
			for _, p := range l.Items {
				wantInit = append(wantInit, seen{watch.Added, p.Name, p.ResourceVersion})
			}
			if got := collect(t, w, len(wantInit), 10*time.Second); !equalSeen(got, wantInit) {
				t.Errorf("got %v, want %v", got, wantInit)
			}
			c, err := pods.Create(ctx, testPod("c"+rv), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := collect(t, w, 1, 10*time.Second); got[0] != (seen{watch.Added, c.Name, c.ResourceVersion}) {
				t.Errorf("got %v after the initial state", got[0])
			}
		})
	}

	t.Run("sendInitialEvents ends with a bookmark", func(t *testing.T) {
		w, err := pods.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr(true), AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, w, len(l.Items)+1, 10*time.Second)
		for i, it := range l.Items {
			if got[i].typ != watch.Added || got[i].name != it.Name {
				t.Errorf("initial event %d is %v, want ADDED %s", i, got[i], it.Name)
			}
		}
		if last := got[len(got)-1]; last.typ != watch.Bookmark {
			t.Errorf("initial events end with %v, want a bookmark", last)
		}
	})

	t.Run("label selector: objects entering and leaving", func(t *testing.T) {
		cur, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: cur.ResourceVersion, LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		in, err := pods.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"web"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mod, err := pods.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"1"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := pods.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"gone"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantSel := []seen{{watch.Added, "b", in.ResourceVersion}, {watch.Modified, "b", mod.ResourceVersion}, {watch.Deleted, "b", out.ResourceVersion}}
		if got := collect(t, w, 3, 10*time.Second); !equalSeen(got, wantSel) {
			t.Errorf("got %v\nwant %v", got, wantSel)
		}
	})

	t.Run("field selector spec.nodeName", func(t *testing.T) {
		w, err := env.Client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-x", ResourceVersion: b.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := pods.Create(ctx, testPod("unbound"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bound := testPod("bound")
		bound.Spec.NodeName = "node-x"
		created, err := pods.Create(ctx, bound, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := collect(t, w, 1, 10*time.Second); got[0] != (seen{watch.Added, "bound", created.ResourceVersion}) {
			t.Errorf("got %v", got[0])
		}
		quiet(t, w, 300*time.Millisecond)
	})

	t.Run("bad resourceVersion", func(t *testing.T) {
		_, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "abc"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("got %v, want 400", err)
		}
	})
}

// TestWatchBookmarks checks that an idle watch that asked for bookmarks
// gets one carrying the log's progress. It takes BookmarkInterval.
func TestWatchBookmarks(t *testing.T) {
	if testing.Short() {
		t.Skip("takes apiserver.BookmarkInterval (10s)")
	}
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	p, err := env.Client.CoreV1().Pods("default").Create(ctx, testPod("p"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		bookmarks bool
	}{
		{"with allowWatchBookmarks", true},
		{"without", false},
	}
	type result struct {
		got []seen
		err error
	}
	results := make([]chan result, len(tests))
	for i, tt := range tests {
		w, err := env.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: p.ResourceVersion, AllowWatchBookmarks: tt.bookmarks})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		results[i] = make(chan result, 1)
		go func() {
			var r result
			deadline := time.After(apiserver.BookmarkInterval + 2*time.Second)
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						r.err = fmt.Errorf("watch closed")
						results[i] <- r
						return
					}
					m, _ := metaOf(ev.Object)
					r.got = append(r.got, seen{ev.Type, m.GetName(), m.GetResourceVersion()})
					if ev.Type == watch.Bookmark {
						results[i] <- r
						return
					}
				case <-deadline:
					results[i] <- r
					return
				}
			}
		}()
	}
	// Progress the log with a write the watches do not match.
	cm, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tick"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := <-results[i]
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !tt.bookmarks {
				if len(r.got) != 0 {
					t.Errorf("got %v, want nothing", r.got)
				}
				return
			}
			if len(r.got) != 1 || r.got[0].typ != watch.Bookmark {
				t.Fatalf("got %v, want one bookmark", r.got)
			}
			if r.got[0].rv != cm.ResourceVersion {
				t.Errorf("bookmark at %s, want the log's head %s", r.got[0].rv, cm.ResourceVersion)
			}
		})
	}
}

// TestWatchGone checks 410 Gone for a resourceVersion the log no longer
// holds. The hub keeps recent events in memory, so the head of the stream
// is purged while the control plane is down and the watch is made after a
// restart.
func TestWatchGone(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxFor(t, 90*time.Second)
	cp, stop := startControlPlane(t, dir)
	cs := clientFor(t, cp)
	var rvs []string
	for i := range 5 {
		cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs = append(rvs, cm.ResourceVersion)
	}
	last, err := events.ParseRevision(rvs[4])
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Hub.WaitFor(ctx, events.Stream, last); err != nil {
		t.Fatal(err)
	}
	s, err := cp.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the last two writes only.
	if err := s.Purge(ctx, jetstream.WithPurgeKeep(2)); err != nil {
		t.Fatal(err)
	}
	stop()

	cp, _ = startControlPlane(t, dir)
	cs = clientFor(t, cp)
	cms := cs.CoreV1().ConfigMaps("default")
	tests := []struct {
		name string
		rv   string
		// want are the names the watch delivers; nil means 410 Gone.
		want []string
	}{
		{"older than the log", rvs[1], nil},
		{"oldest purged", rvs[2], []string{"cm-3", "cm-4"}},
		{"inside the log", rvs[3], []string{"cm-4"}},
		{"very old", "1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: tt.rv})
			if tt.want == nil {
				if err == nil {
					// kube may also answer 200 with an ERROR event.
					defer w.Stop()
					ev := <-w.ResultChan()
					err = apierrors.FromObject(ev.Object)
				}
				if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					t.Fatalf("got %v, want 410", err)
				}
				if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code != http.StatusGone {
					t.Errorf("status %v, want code 410", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			got := collect(t, w, len(tt.want), 10*time.Second)
			for i, n := range tt.want {
				if got[i].name != n || got[i].typ != watch.Added {
					t.Errorf("event %d: %v, want ADDED %s", i, got[i], n)
				}
			}
		})
	}

	t.Run("raw 410 is a Status", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+cp.Addr+"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion="+rvs[0], nil)
		req.Header.Set("Authorization", "Bearer "+controlplanetest.AdminToken)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			// An ERROR event in the stream is fine as well.
			var ev metav1.WatchEvent
			if err := json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&ev); err != nil || ev.Type != string(watch.Error) {
				t.Fatalf("200 without an ERROR event: %v %v", err, ev.Type)
			}
			return
		}
		var st metav1.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusGone || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
			t.Errorf("got %d %+v", resp.StatusCode, st)
		}
	})
}

// startControlPlane starts a control plane on dir (which may hold one from
// before) with the test tokens. stop closes it (also run by t.Cleanup).
func startControlPlane(t *testing.T, dir string) (cp *controlplane.ControlPlane, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err = controlplane.Start(ctx, controlplane.Config{
		DataDir:  dir,
		Listener: ln,
		NoFsync:  true,
		Authenticator: apiserver.TokenAuthenticator{
			controlplanetest.AdminToken: {User: "admin", Groups: []string{apiserver.GroupMasters}},
		},
	})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	stop = sync.OnceFunc(cp.Close)
	t.Cleanup(stop)
	return cp, stop
}

func clientFor(t *testing.T, cp *controlplane.ControlPlane) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + cp.Addr, BearerToken: controlplanetest.AdminToken, QPS: -1, Burst: -1})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
