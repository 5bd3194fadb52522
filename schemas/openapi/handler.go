package openapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/schemas"
)

// Media types of the OpenAPI documents, as served in Content-Type.
const (
	MediaTypeJSON    = "application/json"
	MediaTypeV2Proto = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	MediaTypeV3Proto = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	// The spellings with "@" that clients (client-go's discovery among
	// them) send in Accept; they are no valid media types, so responses
	// use the dotted ones, as kube-apiserver does.
	mediaTypeV2ProtoAt = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mediaTypeV3ProtoAt = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// Handler serves /openapi/v2 and /openapi/v3[/<group-version>] for
// resources. The documents are computed once, here; an error means a
// resource's Go type cannot be described.
func Handler(resources []*schemas.Resource) (http.Handler, error) {
	s, err := Build(resources)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ServeHTTP serves the documents of s. Requests with a matching
// If-None-Match get 304; a v3 request whose hash is stale is redirected
// to the current one.
func (s *Spec) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/openapi/v2":
		ct, ok := negotiate(r.Header.Get("Accept"), map[string]string{
			MediaTypeJSON: MediaTypeJSON, MediaTypeV2Proto: MediaTypeV2Proto, mediaTypeV2ProtoAt: MediaTypeV2Proto,
		})
		if !ok {
			http.Error(w, "not acceptable", http.StatusNotAcceptable)
			return
		}
		body := s.v2JSON
		if ct != MediaTypeJSON {
			var err error
			if body, err = s.v2Proto.get(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		serve(w, r, ct, s.v2Hash, body, false)
	case path == "/openapi/v3":
		serve(w, r, MediaTypeJSON, s.v3IndexHash, s.v3Index, false)
	case strings.HasPrefix(path, "/openapi/v3/"):
		gv := strings.TrimPrefix(path, "/openapi/v3/")
		d, ok := s.v3[gv]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if h := r.URL.Query().Get("hash"); h != "" && h != d.hash {
			http.Redirect(w, r, "/openapi/v3/"+gv+"?hash="+d.hash, http.StatusMovedPermanently)
			return
		}
		ct, ok := negotiate(r.Header.Get("Accept"), map[string]string{
			MediaTypeJSON: MediaTypeJSON, MediaTypeV3Proto: MediaTypeV3Proto, mediaTypeV3ProtoAt: MediaTypeV3Proto,
		})
		if !ok {
			http.Error(w, "not acceptable", http.StatusNotAcceptable)
			return
		}
		body := d.json
		if ct != MediaTypeJSON {
			var err error
			if body, err = d.proto.get(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		serve(w, r, ct, d.hash, body, r.URL.Query().Get("hash") != "")
	default:
		http.NotFound(w, r)
	}
}

func serve(w http.ResponseWriter, r *http.Request, contentType, hash string, body *blob, immutable bool) {
	// The ETag differs per representation: JSON and protobuf bodies differ.
	etag := `"` + hash + `-` + shortType(contentType) + `"`
	h := w.Header()
	h.Set("Etag", etag)
	h.Set("Vary", "Accept, Accept-Encoding")
	if immutable {
		h.Set("Cache-Control", "public, immutable, max-age=31536000")
	} else {
		h.Set("Cache-Control", "no-cache, private")
	}
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", contentType)
	data := body.raw
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		if gz := body.gzipped(); gz != nil {
			h.Set("Content-Encoding", "gzip")
			data = gz
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(data)
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		enc, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(enc) == "gzip" && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func shortType(ct string) string {
	if ct == MediaTypeJSON {
		return "json"
	}
	return "pb"
}

func etagMatches(header, etag string) bool {
	for e := range strings.SplitSeq(header, ",") {
		e = strings.TrimSpace(e)
		if e == "*" || strings.TrimPrefix(e, "W/") == etag {
			return true
		}
	}
	return false
}

// negotiate picks, in the client's order, the first Accept entry the
// server offers; offers maps accepted media types to the Content-Type
// served. No Accept header, or a wildcard, means JSON. Quality values are
// ignored apart from q=0.
func negotiate(accept string, offers map[string]string) (string, bool) {
	if strings.TrimSpace(accept) == "" {
		return MediaTypeJSON, true
	}
	for part := range strings.SplitSeq(accept, ",") {
		// Not mime.ParseMediaType: "@" in the protobuf types is no token.
		mt, params, _ := strings.Cut(part, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if q := strings.ReplaceAll(params, " ", ""); strings.Contains(q, "q=0;") || strings.HasSuffix(q, "q=0") {
			continue
		}
		if ct, ok := offers[mt]; ok {
			return ct, true
		}
		if mt == "*/*" || mt == "application/*" {
			return MediaTypeJSON, true
		}
	}
	return "", false
}
