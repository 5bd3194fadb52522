package apiserver

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// continueToken is kube's format: base64 of {"v","rv","start"}, start being
// the next key relative to the collection prefix.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

func encodeContinue(rv events.Revision, next, prefix string) string {
	b, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: int64(rv), StartKey: strings.TrimPrefix(next, prefix)})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(tok, prefix string) (events.Revision, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, "", errBadRequest("continue key is not valid: %v", err)
	}
	var c continueToken
	if err := json.Unmarshal(b, &c); err != nil || c.APIVersion != "meta.k8s.io/v1" || c.ResourceVersion <= 0 {
		return 0, "", errBadRequest("continue key is not valid")
	}
	if strings.Contains(c.StartKey, "..") || strings.HasPrefix(c.StartKey, "/") {
		return 0, "", errBadRequest("continue key is not valid: bad start key")
	}
	return events.Revision(c.ResourceVersion), prefix + c.StartKey, nil
}

func (q *request) collectionPrefix() string {
	return storage.Key(q.res.GroupVersion.Group, q.res.Plural, q.info.Namespace, "")
}

// listItems reads the collection honouring selectors, limit and continue.
// It returns the items, the list's resourceVersion, the continue token and
// the remaining count (nil when unknown).
func (s *Server) listItems(q *request) ([]schemas.Object, events.Revision, string, *int64, error) {
	ls, fs, err := selectors(q)
	if err != nil {
		return nil, 0, "", nil, err
	}
	v := q.r.URL.Query()
	limit := int64(0)
	if l := v.Get("limit"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n < 0 {
			return nil, 0, "", nil, errBadRequest("invalid limit %q", l)
		}
		limit = n
	}
	prefix := q.collectionPrefix()
	opts := storage.ListOptions{}
	if c := v.Get("continue"); c != "" {
		rv, start, err := decodeContinue(c, prefix)
		if err != nil {
			return nil, 0, "", nil, err
		}
		opts.Revision, opts.StartKey = rv, start
	} else if rvs := v.Get("resourceVersion"); rvs != "" && rvs != "0" && v.Get("resourceVersionMatch") == "Exact" {
		rv, err := events.ParseRevision(rvs)
		if err != nil {
			return nil, 0, "", nil, errBadRequest("invalid resourceVersion %q", rvs)
		}
		opts.Revision = rv
	}
	filtered := !ls.Empty() || !fs.Empty()
	var items []schemas.Object
	for {
		page := opts
		if limit > 0 {
			page.Limit = limit - int64(len(items))
			if filtered && page.Limit < 100 {
				// Read ahead: most items may not match.
				page.Limit = 100
			}
		}
		res, err := s.store.List(q.ctx(), prefix, page)
		if errors.Is(err, storage.ErrCompacted) {
			return nil, 0, "", nil, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
		if err != nil {
			return nil, 0, "", nil, err
		}
		opts.Revision = res.Revision
		for i, kv := range res.Items {
			if !namespacedKeyOK(q, kv.Key, prefix) {
				continue
			}
			obj, err := decodeStored(q.res, kv)
			if err != nil {
				return nil, 0, "", nil, err
			}
			if !matches(q.res, obj, ls, fs) {
				continue
			}
			items = append(items, obj)
			if limit > 0 && int64(len(items)) == limit {
				// Stop here; continue after this key if more remain.
				if i < len(res.Items)-1 || res.NextKey != "" {
					next := kv.Key + "\x00"
					var remaining *int64
					if !filtered {
						r := res.Remaining + int64(len(res.Items)-1-i)
						remaining = &r
					}
					return items, res.Revision, encodeContinue(res.Revision, next, prefix), remaining, nil
				}
				return items, res.Revision, "", nil, nil
			}
		}
		if res.NextKey == "" {
			return items, res.Revision, "", nil, nil
		}
		opts.StartKey = res.NextKey
	}
}

// namespacedKeyOK filters keys of a deeper level: listing cluster-scoped
// /registry/core/namespaces/ must not return anything else, and an
// all-namespaces list gets ns/name keys only.
func namespacedKeyOK(q *request, key, prefix string) bool {
	rest := strings.TrimPrefix(key, prefix)
	slashes := strings.Count(rest, "/")
	if q.res.Namespaced && q.info.Namespace == "" {
		return slashes == 1
	}
	return slashes == 0
}

func (s *Server) list(q *request) {
	items, rv, cont, remaining, err := s.listItems(q)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	switch {
	case q.out.table:
		writeJSON(q.w, http.StatusOK, s.table(q, items, rv.String(), cont))
	case q.out.partialMeta:
		writeJSON(q.w, http.StatusOK, partialMetaList(items, rv.String(), cont))
	default:
		list, err := listObject(q.res, items, rv.String(), cont, remaining)
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		writeJSON(q.w, http.StatusOK, list)
	}
}
