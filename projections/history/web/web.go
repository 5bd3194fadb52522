package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/projections/history/audit"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/timeline"
	"github.com/cairn-dev/cairn/projections/history/travel"
	"github.com/cairn-dev/cairn/schemas"
)

//go:embed static
var static embed.FS

// Handler serves the history API and page under prefix (e.g. "/history/"):
//
//	GET <prefix>                   the timeline page
//	GET <prefix>api/objects        ?kind=K[&namespace=N]: objects of a kind at the head
//	GET <prefix>api/timeline       ?kind=K&name=X[&namespace=N][&uid=U]
//	GET <prefix>api/audit          ?user=&verb=&kind=&namespace=&name=&since=&until=&limit=
//	GET <prefix>api/get            ?kind=K[&name=X][&namespace=N]&at=REV|RFC3339
//	GET <prefix>api/diff           ?kind=K&name=X[&namespace=N]&from=&to=
//	GET <prefix>api/progress       how far the projection is
//	GET <prefix>api/watch          Server-Sent Events: "head" with the revision at each commit
//
// since accepts a duration ("10m": that long ago) or an RFC 3339 time.
// Errors are JSON {"error": "..."} with status 400, 404 or 500.
func Handler(st *store.Store, prefix string) http.Handler {
	h := &handler{st: st}
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	mux.Handle(prefix, http.StripPrefix(prefix, http.FileServerFS(sub)))
	mux.HandleFunc(prefix+"api/objects", h.objects)
	mux.HandleFunc(prefix+"api/timeline", h.timeline)
	mux.HandleFunc(prefix+"api/audit", h.audit)
	mux.HandleFunc(prefix+"api/get", h.get)
	mux.HandleFunc(prefix+"api/diff", h.diff)
	mux.HandleFunc(prefix+"api/progress", h.progress)
	mux.HandleFunc(prefix+"api/watch", h.watch)
	return mux
}

type handler struct{ st *store.Store }

// errBadRequest marks errors of the request.
var errBadRequest = errors.New("bad request")

func writeJSON(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, errBadRequest):
			code = http.StatusBadRequest
		case errors.Is(err, timeline.ErrNotFound), errors.Is(err, travel.ErrNotFound), errors.Is(err, store.ErrNotFound):
			code = http.StatusNotFound
		}
		w.WriteHeader(code)
		v = map[string]string{"error": err.Error()}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// Resolve finds a served resource by kind, plural, singular or short name,
// case-insensitively, or takes "resource.group" / "group/resource" as is.
func Resolve(kind string) (group, resource string, err error) {
	want := strings.ToLower(kind)
	for _, r := range schemas.NewRegistry().All() {
		names := append([]string{strings.ToLower(r.Kind), r.Plural, r.Singular}, r.ShortNames...)
		for _, n := range names {
			if n == want {
				return r.GroupVersion.Group, r.Plural, nil
			}
		}
	}
	if g, r, ok := strings.Cut(want, "/"); ok {
		return g, r, nil
	}
	if r, g, ok := strings.Cut(want, "."); ok {
		return g, r, nil
	}
	return "", "", fmt.Errorf("%w: unknown kind %q", errBadRequest, kind)
}

func (h *handler) keyOf(r *http.Request) (store.ObjKey, error) {
	q := r.URL.Query()
	g, res, err := h.resolve(q.Get("kind"))
	if err != nil {
		return store.ObjKey{}, err
	}
	if q.Get("name") == "" {
		return store.ObjKey{}, fmt.Errorf("%w: name is required", errBadRequest)
	}
	return store.ObjKey{Group: g, Resource: res, Namespace: q.Get("namespace"), Name: q.Get("name")}, nil
}

// answer runs query in a read transaction and writes its result, or its
// error.
func answer[T any](h *handler, w http.ResponseWriter, query func(tx *store.Tx) (T, error)) {
	var v T
	err := h.st.View(func(tx *store.Tx) (err error) {
		v, err = query(tx)
		return err
	})
	writeJSON(w, v, err)
}

func (h *handler) timeline(w http.ResponseWriter, r *http.Request) {
	key, err := h.keyOf(r)
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	answer(h, w, func(tx *store.Tx) (*timeline.Timeline, error) {
		return timeline.Build(tx, timeline.Options{Key: key, UID: r.URL.Query().Get("uid")})
	})
}

// ParseSince reads a duration before now ("10m") or an RFC 3339 time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q is neither a duration nor an RFC 3339 time", errBadRequest, s)
	}
	return t, nil
}

func (h *handler) audit(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := audit.Query{User: v.Get("user"), Verb: v.Get("verb"), Kind: v.Get("kind"),
		Namespace: v.Get("namespace"), Name: v.Get("name")}
	var err error
	now := time.Now()
	if q.Since, err = ParseSince(v.Get("since"), now); err == nil {
		q.Until, err = ParseSince(v.Get("until"), now)
	}
	if l := v.Get("limit"); err == nil && l != "" {
		if q.Limit, err = strconv.Atoi(l); err != nil {
			err = fmt.Errorf("%w: limit %q", errBadRequest, l)
		}
	}
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	answer(h, w, func(tx *store.Tx) (*audit.Result, error) { return audit.Run(tx, q) })
}

func point(s string) (travel.Point, error) {
	if s == "" {
		return travel.Point{}, nil
	}
	p, err := travel.ParsePoint(s)
	if err != nil {
		return p, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	return p, nil
}

// listResult is the answer of get without a name.
type listResult struct {
	Revision int64          `json:"revision"`
	Items    []travel.State `json:"items"`
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	at, err := point(q.Get("at"))
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	if q.Get("name") != "" {
		key, err := h.keyOf(r)
		if err != nil {
			writeJSON(w, nil, err)
			return
		}
		answer(h, w, func(tx *store.Tx) (*travel.State, error) { return travel.Get(tx, key, at) })
		return
	}
	g, res, err := h.resolve(q.Get("kind"))
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	answer(h, w, func(tx *store.Tx) (listResult, error) {
		rev, items, err := travel.List(tx, g, res, q.Get("namespace"), at)
		return listResult{Revision: int64(rev), Items: append([]travel.State{}, items...)}, err
	})
}

func (h *handler) diff(w http.ResponseWriter, r *http.Request) {
	var from, to travel.Point
	key, err := h.keyOf(r)
	if err == nil {
		from, err = point(r.URL.Query().Get("from"))
	}
	if err == nil {
		to, err = point(r.URL.Query().Get("to"))
	}
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	answer(h, w, func(tx *store.Tx) (*travel.Delta, error) { return travel.Diff(tx, key, from, to) })
}

func (h *handler) objects(w http.ResponseWriter, r *http.Request) {
	g, res, err := h.resolve(r.URL.Query().Get("kind"))
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	answer(h, w, func(tx *store.Tx) ([]store.ObjKey, error) {
		names := []store.ObjKey{}
		_, items, err := travel.List(tx, g, res, r.URL.Query().Get("namespace"), travel.Point{})
		for _, it := range items {
			names = append(names, it.Key)
		}
		return names, err
	})
}

func (h *handler) progress(w http.ResponseWriter, _ *http.Request) {
	p, err := h.st.Progress()
	writeJSON(w, p, err)
}

// watch streams the head revision at each commit as Server-Sent Events.
func (h *handler) watch(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, nil, errors.New("streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func() bool {
		p, err := h.st.Progress()
		if err != nil {
			return false
		}
		_, err = fmt.Fprintf(w, "event: head\ndata: %d\n\n", p.Rev)
		fl.Flush()
		return err == nil
	}
	for {
		ch := h.st.Changed()
		if !send() {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-ch:
		case <-time.After(15 * time.Second): // keep-alive through proxies
		}
	}
}
