package apiserver

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNegotiate(t *testing.T) {
	cases := []struct {
		accept, query string
		want          outputFormat
		err           error
	}{
		{accept: "", want: outputFormat{}},
		{accept: "application/json", want: outputFormat{}},
		{accept: "application/vnd.kubernetes.protobuf, */*", want: outputFormat{proto: true}},
		{accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
			want: outputFormat{table: true}},
		{accept: "application/json;as=Table;v=v2;g=meta.k8s.io, application/json", want: outputFormat{}},
		{accept: "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", want: outputFormat{partialMeta: true}},
		{accept: "text/html, application/yaml", want: outputFormat{}},
		{accept: "text/html", err: errNotAcceptableFormat},
		{accept: "application/json;as=Table;v=v1;g=meta.k8s.io", query: "includeObject=Object",
			want: outputFormat{table: true, includeObject: metav1.IncludeObject}},
	}
	for _, c := range cases {
		// Twice: the second answer comes from the cache.
		for range 2 {
			r := httptest.NewRequest("GET", "/api/v1/pods?"+c.query, nil)
			r.Header.Set("Accept", c.accept)
			got, err := negotiate(r)
			if !errors.Is(err, c.err) {
				t.Errorf("Accept %q: error %v, want %v", c.accept, err, c.err)
				continue
			}
			want := c.want
			if want.includeObject == "" {
				want.includeObject = metav1.IncludeMetadata
			}
			if err == nil && got != want {
				t.Errorf("Accept %q: %+v, want %+v", c.accept, got, want)
			}
		}
	}
}

func TestAcceptCacheBounded(t *testing.T) {
	c := &acceptCache{m: map[string]acceptResult{}}
	for i := range 3 * acceptCacheSize {
		accept := fmt.Sprintf("application/json;x=%d", i)
		if _, err := c.parse(accept); err != nil {
			t.Fatalf("%s: %v", accept, err)
		}
	}
	if n := len(c.m); n != acceptCacheSize {
		t.Fatalf("cache holds %d values, want %d", n, acceptCacheSize)
	}
	// Values beyond the bound are still answered.
	if f, err := c.parse("application/vnd.kubernetes.protobuf"); err != nil || !f.proto {
		t.Fatalf("uncached value: %+v, %v", f, err)
	}
}
