package apiserver

import (
	"net/http"
	"strings"
)

// requestInfo is what a URL and method say about an API request, as
// kube-apiserver's RequestInfoFactory derives it.
type requestInfo struct {
	IsResourceRequest bool
	Path              string
	Verb              string // get list watch create update patch delete deletecollection
	APIGroup          string
	APIVersion        string
	Namespace         string
	Resource          string
	Subresource       string
	Name              string
}

// namespaceSubresources are the subresources of a namespace itself, so that
// /api/v1/namespaces/x/status is the status of namespace x.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

func parseRequestInfo(r *http.Request) requestInfo {
	info := requestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 2 {
		return info
	}
	switch parts[0] {
	case "api":
		info.APIVersion = parts[1]
		parts = parts[2:]
	case "apis":
		if len(parts) < 3 {
			return info
		}
		info.APIGroup, info.APIVersion = parts[1], parts[2]
		parts = parts[3:]
	default:
		return info
	}
	if len(parts) == 0 {
		return info
	}
	info.IsResourceRequest = true
	watchPath := false
	if parts[0] == "watch" {
		watchPath = true
		parts = parts[1:]
		if len(parts) == 0 {
			info.IsResourceRequest = false
			return info
		}
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		info.Namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	info.Resource = parts[0]
	if len(parts) >= 2 {
		info.Name = parts[1]
	}
	if len(parts) >= 3 {
		info.Subresource = parts[2]
	}
	if info.Resource == "namespaces" {
		// /api/v1/namespaces/x names namespace x; it is not namespaced.
		info.Name = info.Namespace
		info.Namespace = ""
		if len(parts) >= 3 {
			info.Subresource = parts[2]
		}
		if len(parts) == 1 {
			info.Name = ""
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watchPath || isWatch(r):
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		default:
			info.Verb = "get"
		}
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		if info.Name == "" {
			info.Verb = "deletecollection"
		} else {
			info.Verb = "delete"
		}
	}
	return info
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
