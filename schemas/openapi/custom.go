package openapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn/schemas"
)

// Dynamic serves the documents of the built-in resources (computed once,
// here) merged with those of the custom resources custom returns, each of
// which carries its own documents (schemas.Custom.OpenAPIV2 and
// OpenAPIV3, as kube's CRD OpenAPI controllers build them). generation
// counts the changes of the custom set; the merged documents are rebuilt
// on the first request after one. Custom paths and definitions are added
// to the Swagger 2.0 document (definitions already there are kept); each
// custom group version gets its own v3 document, listed in the index.
func Dynamic(builtin []*schemas.Resource, custom func() []*schemas.Resource, generation func() uint64) (http.Handler, error) {
	base, err := Build(builtin)
	if err != nil {
		return nil, err
	}
	return &dynamicSpec{base: base, custom: custom, generation: generation}, nil
}

type dynamicSpec struct {
	base       *Spec
	custom     func() []*schemas.Resource
	generation func() uint64

	mu      sync.Mutex
	gen     uint64
	current *Spec
}

func (d *dynamicSpec) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, err := d.spec()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.ServeHTTP(w, r)
}

func (d *dynamicSpec) spec() (*Spec, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	gen := d.generation()
	if d.current != nil && gen == d.gen {
		return d.current, nil
	}
	var rs []*schemas.Resource
	for _, r := range d.custom() {
		if r.Custom != nil {
			rs = append(rs, r)
		}
	}
	s := d.base
	if len(rs) > 0 {
		var err error
		if s, err = merge(d.base, rs); err != nil {
			return nil, err
		}
	}
	d.gen, d.current = gen, s
	return s, nil
}

// merge returns base with the custom resources' documents added.
func merge(base *Spec, rs []*schemas.Resource) (*Spec, error) {
	s := *base
	s.v3 = maps.Clone(base.v3)

	var v2 map[string]any
	if err := json.Unmarshal(base.v2JSON.raw, &v2); err != nil {
		return nil, fmt.Errorf("openapi: merge v2: %w", err)
	}
	v3 := map[string]map[string]any{}
	for _, r := range rs {
		var doc map[string]any
		if err := json.Unmarshal(r.Custom.OpenAPIV2, &doc); err != nil {
			return nil, fmt.Errorf("openapi: %s v2: %w", r.GVR(), err)
		}
		mergeSection(v2, doc, "paths")
		mergeSection(v2, doc, "definitions")

		if err := json.Unmarshal(r.Custom.OpenAPIV3, &doc); err != nil {
			return nil, fmt.Errorf("openapi: %s v3: %w", r.GVR(), err)
		}
		p := gvPath(r.GroupVersion)
		if _, builtin := base.v3[p]; builtin {
			continue // a built-in group version is not extended
		}
		if have, ok := v3[p]; ok {
			mergeSection(have, doc, "paths")
			hc, _ := have["components"].(map[string]any)
			dc, _ := doc["components"].(map[string]any)
			if hc != nil && dc != nil {
				mergeSection(hc, dc, "schemas")
			}
		} else {
			v3[p] = doc
		}
	}
	raw, err := json.Marshal(v2)
	if err != nil {
		return nil, fmt.Errorf("openapi: merge v2: %w", err)
	}
	s.v2JSON, s.v2Proto, s.v2Hash = newBlob(raw), &lazyProto{json: raw, convert: v2Proto}, hash(raw)
	for p, doc := range v3 {
		raw, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s v3: %w", p, err)
		}
		s.v3[p] = &document{json: newBlob(raw), proto: &lazyProto{json: raw, convert: v3Proto}, hash: hash(raw)}
	}
	if err := s.buildIndex(slices.Sorted(maps.Keys(s.v3))); err != nil {
		return nil, err
	}
	return &s, nil
}

// mergeSection adds the entries of src[key] that dst[key] lacks.
func mergeSection(dst, src map[string]any, key string) {
	from, _ := src[key].(map[string]any)
	if len(from) == 0 {
		return
	}
	to, _ := dst[key].(map[string]any)
	if to == nil {
		to = map[string]any{}
		dst[key] = to
	}
	for k, v := range from {
		if _, ok := to[k]; !ok {
			to[k] = v
		}
	}
}
