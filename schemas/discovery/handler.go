package discovery

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/cairn-dev/cairn/schemas"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Content types of aggregated discovery responses. Clients match them by
// parameters, in any order.
const (
	ContentTypeV2      = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	ContentTypeV2Beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	contentTypeJSON    = "application/json"
)

// body is a precomputed response.
type body struct {
	data []byte
	etag string
}

func newBody(v any) body {
	data, err := json.Marshal(v)
	if err != nil {
		// The values are discovery types built here: they always marshal.
		panic(fmt.Sprintf("discovery: marshal %T: %v", v, err))
	}
	return body{data: data, etag: fmt.Sprintf(`"%X"`, sha256.Sum256(data))}
}

// handler serves the discovery documents computed from a fixed set of
// resources.
type handler struct {
	coreVersions []string
	groupList    body
	groups       map[string]body // /apis/<group>
	lists        map[string]body // "api/v1", "apis/apps/v1"
	// Aggregated documents: [0] for /api, [1] for /apis, per format.
	aggV2, aggV2Beta1 [2]body
}

// Handler serves discovery for resources: /api (APIVersions), /api/<v> and
// /apis/<group>/<v> (APIResourceList), /apis (APIGroupList),
// /apis/<group> (APIGroup), and, when Accept asks for
// apidiscovery.k8s.io v2 (or v2beta1) APIGroupDiscoveryList, the
// aggregated documents at /api and /apis. The documents are computed once;
// the handler is safe for concurrent use.
func Handler(resources []*schemas.Resource) http.Handler {
	h := &handler{groups: map[string]body{}, lists: map[string]body{}}
	all := groupsOf(resources)
	var core, named []*group
	groupList := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range all {
		for _, v := range g.versions {
			gv := schema.GroupVersion{Group: g.name, Version: v}
			h.lists[gvPath(gv)] = newBody(resourceList(gv, g.resources[v]))
		}
		if g.name == "" {
			core = append(core, g)
			h.coreVersions = g.versions
			continue
		}
		named = append(named, g)
		ag := g.apiGroup()
		groupList.Groups = append(groupList.Groups, ag)
		h.groups[g.name] = newBody(ag)
	}
	h.groupList = newBody(groupList)
	for i, gs := range [][]*group{core, named} {
		list := aggregated(gs)
		h.aggV2[i] = newBody(list)
		list.APIVersion = "apidiscovery.k8s.io/v2beta1"
		h.aggV2Beta1[i] = newBody(list)
	}
	return h
}

func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "method not allowed")
		return
	}
	path := strings.Trim(r.URL.Path, "/")
	switch {
	case path == "api" || path == "apis":
		i := 0
		if path == "apis" {
			i = 1
		}
		switch negotiate(r.Header.Get("Accept")) {
		case formatV2:
			h.serve(w, r, ContentTypeV2, h.aggV2[i])
			return
		case formatV2Beta1:
			h.serve(w, r, ContentTypeV2Beta1, h.aggV2Beta1[i])
			return
		}
		if i == 1 {
			h.serve(w, r, contentTypeJSON, h.groupList)
			return
		}
		h.serve(w, r, contentTypeJSON, newBody(h.apiVersions(r)))
	case strings.HasPrefix(path, "apis/") && strings.Count(path, "/") == 1:
		b, ok := h.groups[strings.TrimPrefix(path, "apis/")]
		if !ok {
			notFound(w, r)
			return
		}
		h.serve(w, r, contentTypeJSON, b)
	default:
		b, ok := h.lists[path]
		if !ok {
			notFound(w, r)
			return
		}
		h.serve(w, r, contentTypeJSON, b)
	}
}

// apiVersions is the legacy /api answer; like kube-apiserver it tells the
// client to keep using the address it reached.
func (h *handler) apiVersions(r *http.Request) *metav1.APIVersions {
	versions := h.coreVersions
	if versions == nil {
		versions = []string{}
	}
	return &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: versions,
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
		},
	}
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request, contentType string, b body) {
	hd := w.Header()
	hd.Set("Etag", b.etag)
	hd.Set("Vary", "Accept")
	hd.Set("Cache-Control", "public")
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, b.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", contentType)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b.data)
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

type format int

const (
	formatLegacy format = iota
	formatV2
	formatV2Beta1
)

// negotiate returns the first format in the client's Accept order that is
// served: aggregated v2 or v2beta1, or the legacy JSON documents (also for
// anything unrecognised, as kube-apiserver's discovery does for JSON and
// protobuf clients alike).
func negotiate(accept string) format {
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if params["q"] == "0" {
			continue
		}
		switch mt {
		case contentTypeJSON:
			if params["g"] == apidiscoveryv2.SchemeGroupVersion.Group && params["as"] == "APIGroupDiscoveryList" {
				switch params["v"] {
				case "v2":
					return formatV2
				case "v2beta1":
					return formatV2Beta1
				}
				continue
			}
			return formatLegacy
		case "*/*", "application/*":
			return formatLegacy
		}
	}
	return formatLegacy
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
		fmt.Sprintf("the server could not find the requested resource (get %s)", r.URL.Path))
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  msg,
		Reason:   reason,
		Code:     int32(code),
	}
	data, _ := json.Marshal(st)
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
