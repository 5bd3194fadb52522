package apiserver

import (
	"net/http/httptest"
	"testing"
)

func TestParseRequestInfo(t *testing.T) {
	tests := []struct {
		method, path string
		want         requestInfo
	}{
		{"GET", "/api/v1/namespaces/default/pods", requestInfo{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Namespace: "default", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/default/pods/p1", requestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Namespace: "default", Resource: "pods", Name: "p1"}},
		{"GET", "/api/v1/namespaces/default/pods?watch=true", requestInfo{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Namespace: "default", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/default/pods", requestInfo{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Namespace: "default", Resource: "pods"}},
		{"PUT", "/api/v1/namespaces/default/pods/p1/status", requestInfo{IsResourceRequest: true, Verb: "update", APIVersion: "v1", Namespace: "default", Resource: "pods", Name: "p1", Subresource: "status"}},
		{"POST", "/api/v1/namespaces/default/pods/p1/binding", requestInfo{IsResourceRequest: true, Verb: "create", APIVersion: "v1", Namespace: "default", Resource: "pods", Name: "p1", Subresource: "binding"}},
		{"GET", "/api/v1/namespaces", requestInfo{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Resource: "namespaces"}},
		{"GET", "/api/v1/namespaces/kube-system", requestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "namespaces", Name: "kube-system"}},
		{"PUT", "/api/v1/namespaces/x/status", requestInfo{IsResourceRequest: true, Verb: "update", APIVersion: "v1", Resource: "namespaces", Name: "x", Subresource: "status"}},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments", requestInfo{IsResourceRequest: true, Verb: "deletecollection", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments"}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", requestInfo{IsResourceRequest: true, Verb: "patch", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments", Name: "d", Subresource: "scale"}},
		{"GET", "/api/v1/nodes/n1", requestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "nodes", Name: "n1"}},
		{"GET", "/apis/apps/v1/deployments", requestInfo{IsResourceRequest: true, Verb: "list", APIGroup: "apps", APIVersion: "v1", Resource: "deployments"}},
		{"GET", "/healthz", requestInfo{Verb: "get"}},
		{"GET", "/apis/apps/v1", requestInfo{Verb: "get", APIGroup: "apps", APIVersion: "v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			got := parseRequestInfo(r)
			got.Path = ""
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
