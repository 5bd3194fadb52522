package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// BookmarkInterval is how often an idle watch that asked for bookmarks gets
// one (kube sends them about once a minute; cairn's are cheap).
const BookmarkInterval = 10 * time.Second

// watchStream writes watch events as newline-delimited JSON.
type watchStream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	q     *request
	s     *Server
	buf   bytes.Buffer
	table bool
}

func (ws *watchStream) emit(typ watch.EventType, obj schemas.Object, raw json.RawMessage) error {
	ws.buf.Reset()
	ws.buf.WriteString(`{"type":"`)
	ws.buf.WriteString(string(typ))
	ws.buf.WriteString(`","object":`)
	switch {
	case ws.table && typ != watch.Bookmark:
		t := ws.s.table(ws.q, []schemas.Object{obj}, obj.GetResourceVersion(), "")
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		ws.buf.Write(b)
	case raw != nil:
		ws.buf.Write(raw)
	default:
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		ws.buf.Write(b)
	}
	ws.buf.WriteString("}\n")
	if _, err := ws.w.Write(ws.buf.Bytes()); err != nil {
		return err
	}
	return ws.rc.Flush()
}

func (ws *watchStream) bookmark(rv events.Revision, initialEnd bool) error {
	obj := ws.q.res.New()
	obj.GetObjectKind().SetGroupVersionKind(ws.q.res.GVK())
	obj.SetResourceVersion(rv.String())
	if initialEnd {
		obj.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return ws.emit(watch.Bookmark, obj, nil)
}

func (s *Server) watch(q *request) {
	ls, fs, err := selectors(q)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	v := q.r.URL.Query()
	rvStr := v.Get("resourceVersion")
	sendInitial := v.Get("sendInitialEvents") == "true"
	bookmarks := v.Get("allowWatchBookmarks") == "true"
	timeout := time.Duration(1800*(1+rand.Float64())) * time.Second
	if t := v.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			writeStatus(q.w, errBadRequest("invalid timeoutSeconds %q", t))
			return
		}
		timeout = time.Duration(n) * time.Second
	}
	filtered := !ls.Empty() || !fs.Empty()
	visible := map[string]bool{}
	var initial []schemas.Object
	var from events.Revision
	if rvStr == "" || rvStr == "0" || sendInitial {
		items, rv, _, _, err := s.listAll(q, 0)
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		initial, from = items, rv
		for _, it := range items {
			visible[objKey(it)] = true
		}
	} else {
		from, err = events.ParseRevision(rvStr)
		if err != nil {
			writeStatus(q.w, errBadRequest("invalid resourceVersion %q", rvStr))
			return
		}
		if filtered {
			// Learn which objects the client saw as matching at from, so
			// objects leaving the selection are sent as DELETED.
			items, _, _, _, err := s.listAll(q, from)
			if err == nil {
				for _, it := range items {
					visible[objKey(it)] = true
				}
			}
		}
	}
	name, _ := fs.RequiresExactMatch("metadata.name")
	ns := q.info.Namespace
	if n, ok := fs.RequiresExactMatch("metadata.namespace"); ok && ns == "" {
		ns = n
	}
	node := ""
	if q.res.Plural == "pods" && q.res.GroupVersion.Group == "" {
		node, _ = fs.RequiresExactMatch("spec.nodeName")
	}
	w, err := s.hub.Watch(q.ctx(), watchhub.Request{Group: q.res.GroupVersion.Group, Resource: q.res.Plural,
		Namespace: ns, Name: name, Node: node, From: from})
	if errors.Is(err, events.ErrTooOld) {
		writeStatus(q.w, apierrors.NewResourceExpired("too old resource version: "+rvStr))
		return
	}
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	s.watches.Add(1)
	defer s.watches.Done()
	defer w.Stop()

	q.w.Header().Set("Content-Type", "application/json")
	q.w.Header().Set("Transfer-Encoding", "chunked")
	q.w.WriteHeader(http.StatusOK)
	ws := &watchStream{w: q.w, rc: http.NewResponseController(q.w), q: q, s: s, table: q.out.table}
	if err := ws.rc.Flush(); err != nil {
		return
	}
	for _, obj := range initial {
		if err := ws.emit(watch.Added, obj, nil); err != nil {
			return
		}
	}
	if sendInitial {
		if err := ws.bookmark(from, true); err != nil {
			return
		}
	}
	watchInitialized(q.ctx())
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(BookmarkInterval)
	defer tick.Stop()
	lastSent := from
	for {
		select {
		case <-q.ctx().Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
			if p := w.Progress(); bookmarks && p > lastSent {
				if err := ws.bookmark(p, false); err != nil {
					return
				}
				lastSent = p
			}
		case ev, ok := <-w.Events():
			if !ok {
				if err := w.Err(); err != nil && !errors.Is(err, watchhub.ErrClosed) {
					st := statusFor(apierrors.NewResourceExpired(err.Error()))
					b, _ := json.Marshal(&metav1.WatchEvent{Type: string(watch.Error), Object: rawJSON(&st)})
					_, _ = q.w.Write(append(b, '\n'))
				}
				return
			}
			if err := s.sendEvent(ws, ev, ls, fs, filtered, visible); err != nil {
				return
			}
			lastSent = ev.Revision
		}
	}
}

// sendEvent turns one log event into the watch event this client should
// see, honouring selectors: an object entering the selection is ADDED, one
// leaving it is DELETED.
func (s *Server) sendEvent(ws *watchStream, ev *events.Event, ls labels.Selector, fs fields.Selector, filtered bool, visible map[string]bool) error {
	q := ws.q
	if !filtered && !ws.table && !convertsStored(q.res) {
		return ws.emit(watch.EventType(ev.Type), nil, ev.Object)
	}
	obj, err := decodeStored(q.res, storage.KV{Key: ev.Name, Value: ev.Object, Revision: ev.Revision})
	if err != nil {
		return err
	}
	key := objKey(obj)
	match := matches(q.res, obj, ls, fs)
	var typ watch.EventType
	switch {
	case ev.Type == events.Deleted:
		if filtered && !visible[key] {
			return nil
		}
		typ = watch.Deleted
		delete(visible, key)
	case match:
		typ = watch.Modified
		if ev.Type == events.Added || (filtered && !visible[key]) {
			typ = watch.Added
		}
		visible[key] = true
	default:
		if !visible[key] {
			return nil
		}
		typ = watch.Deleted
		delete(visible, key)
	}
	return ws.emit(typ, obj, nil)
}

func objKey(o schemas.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func rawJSON(v any) runtime.RawExtension {
	b, _ := json.Marshal(v)
	return runtime.RawExtension{Raw: b}
}

// listAll lists every matching object at rev (0 = now), ignoring limit.
func (s *Server) listAll(q *request, rev events.Revision) ([]schemas.Object, events.Revision, string, *int64, error) {
	qq := *q
	r2 := q.r.Clone(q.ctx())
	vals := r2.URL.Query()
	vals.Del("limit")
	vals.Del("continue")
	if rev > 0 {
		vals.Set("resourceVersion", rev.String())
		vals.Set("resourceVersionMatch", "Exact")
	} else {
		vals.Del("resourceVersion")
		vals.Del("resourceVersionMatch")
	}
	r2.URL.RawQuery = vals.Encode()
	qq.r = r2
	return s.listItems(&qq)
}
