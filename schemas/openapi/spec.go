package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/cairn-dev/cairn/schemas"
	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Title and version the documents carry in their info section.
const (
	title   = "Kubernetes"
	version = "v1.32.0"
)

// Spec holds the OpenAPI documents of a set of resources, computed once.
// It is immutable and safe for concurrent use.
type Spec struct {
	models *models
	// kindDefs maps each served kind (and list kind) to its definition.
	kindDefs map[schema.GroupVersionKind]string

	v2JSON  *blob
	v2Proto *lazyProto
	v2Hash  string
	// v3 documents by group-version path ("api/v1", "apis/apps/v1").
	v3      map[string]*document
	v3Index *blob
	// v3IndexHash is the index's hash, for its ETag.
	v3IndexHash string
}

type document struct {
	json  *blob
	proto *lazyProto
	hash  string
}

// Build computes the OpenAPI v2 and v3 documents for resources.
func Build(resources []*schemas.Resource) (*Spec, error) {
	s := &Spec{models: newModels(), kindDefs: map[schema.GroupVersionKind]string{}, v3: map[string]*document{}}
	m := s.models

	// Roots every group version refers to from its operations.
	var commonNames []string
	for _, t := range []reflect.Type{
		reflect.TypeFor[metav1.Status](), reflect.TypeFor[metav1.DeleteOptions](),
		reflect.TypeFor[metav1.Patch](), reflect.TypeFor[metav1.WatchEvent](),
	} {
		name, err := m.addRoot(t, schema.GroupVersionKind{})
		if err != nil {
			return nil, err
		}
		commonNames = append(commonNames, name)
	}
	// Kubernetes publishes Status as the core group's kind.
	statusGVK := schema.GroupVersionKind{Version: "v1", Kind: "Status"}
	if _, err := m.addRoot(reflect.TypeFor[metav1.Status](), statusGVK); err != nil {
		return nil, err
	}
	s.kindDefs[statusGVK] = commonNames[0]

	byGV := map[string][]*schemas.Resource{}
	var gvs []string
	for _, r := range resources {
		p := gvPath(r.GroupVersion)
		if _, ok := byGV[p]; !ok {
			gvs = append(gvs, p)
		}
		byGV[p] = append(byGV[p], r)
	}
	sort.Strings(gvs)

	// Register every definition first: a definition's GVK list spans
	// group versions (DeleteOptions), so rendering waits until all are known.
	gvPaths := map[string][]pathItem{}
	gvRoots := map[string][]string{}
	var allPaths []pathItem
	for _, p := range gvs {
		rs := byGV[p]
		gv := rs[0].GroupVersion
		if _, err := m.addRoot(reflect.TypeFor[metav1.DeleteOptions](), gv.WithKind("DeleteOptions")); err != nil {
			return nil, err
		}
		if _, err := m.addRoot(reflect.TypeFor[metav1.WatchEvent](), gv.WithKind("WatchEvent")); err != nil {
			return nil, err
		}
		roots := append([]string{}, commonNames...)
		for _, r := range rs {
			rp, names, err := s.addResource(r)
			if err != nil {
				return nil, err
			}
			roots = append(roots, names...)
			gvPaths[p] = append(gvPaths[p], rp...)
		}
		gvRoots[p] = roots
		allPaths = append(allPaths, gvPaths[p]...)
	}
	for _, p := range gvs {
		doc, err := s.renderV3Doc(gvPaths[p], m.closure(gvRoots[p]))
		if err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", p, err)
		}
		s.v3[p] = doc
	}
	if err := s.buildV2(allPaths); err != nil {
		return nil, err
	}
	return s, s.buildIndex(gvs)
}

// addResource registers the definitions of r's kind, list kind and
// subresource kinds, and returns r's paths and its root definitions.
func (s *Spec) addResource(r *schemas.Resource) ([]pathItem, []string, error) {
	m := s.models
	if r.New == nil || r.NewList == nil {
		return nil, nil, fmt.Errorf("openapi: resource %s: New and NewList are required", r.GVR())
	}
	kindDef, err := m.addRoot(reflect.TypeOf(r.New()), r.GVK())
	if err != nil {
		return nil, nil, err
	}
	listType := reflect.TypeOf(r.NewList())
	for listType.Kind() == reflect.Pointer {
		listType = listType.Elem()
	}
	listGVK := r.GroupVersion.WithKind(listType.Name())
	listDef, err := m.addRoot(listType, listGVK)
	if err != nil {
		return nil, nil, err
	}
	s.kindDefs[r.GVK()] = kindDef
	s.kindDefs[listGVK] = listDef
	roots := []string{kindDef, listDef}
	subDefs := map[string]string{}
	for _, sub := range r.Subresources {
		sk, ok := subresourceKinds[sub]
		if !ok || sk.Type == nil {
			continue
		}
		name, err := m.addRoot(sk.Type, sk.GVK)
		if err != nil {
			return nil, nil, err
		}
		s.kindDefs[sk.GVK] = name
		subDefs[sub] = name
		roots = append(roots, name)
	}
	return resourcePaths(r, kindDef, listDef, subDefs), roots, nil
}

func (s *Spec) renderV3Doc(paths []pathItem, defs []string) (*document, error) {
	schemasOut := map[string]any{}
	for _, n := range defs {
		schemasOut[n] = renderDefinition(s.models.defs[n], renderV3)
	}
	pathsOut := map[string]any{}
	for _, p := range paths {
		pathsOut[p.Path] = renderPathV3(p)
	}
	doc := map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": title, "version": version},
		"paths":      pathsOut,
		"components": map[string]any{"schemas": schemasOut},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: marshal v3: %w", err)
	}
	return &document{json: newBlob(raw), proto: &lazyProto{json: raw, convert: v3Proto}, hash: hash(raw)}, nil
}

func (s *Spec) buildV2(paths []pathItem) error {
	defs := map[string]any{}
	for n, d := range s.models.defs {
		defs[n] = renderDefinition(d, renderV2)
	}
	pathsOut := map[string]any{}
	for _, p := range paths {
		pathsOut[p.Path] = renderPathV2(p)
	}
	doc := map[string]any{
		"swagger":     "2.0",
		"info":        map[string]any{"title": title, "version": version},
		"paths":       pathsOut,
		"definitions": defs,
		"securityDefinitions": map[string]any{
			"BearerToken": map[string]any{
				"description": "Bearer Token authentication", "in": "header", "name": "authorization", "type": "apiKey",
			},
		},
		"security": []any{map[string]any{"BearerToken": []any{}}},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("openapi: marshal v2: %w", err)
	}
	s.v2JSON, s.v2Proto, s.v2Hash = newBlob(raw), &lazyProto{json: raw, convert: v2Proto}, hash(raw)
	return nil
}

func (s *Spec) buildIndex(gvs []string) error {
	paths := map[string]any{}
	for _, p := range gvs {
		paths[p] = map[string]any{"serverRelativeURL": "/openapi/v3/" + p + "?hash=" + s.v3[p].hash}
	}
	raw, err := json.Marshal(map[string]any{"paths": paths})
	if err != nil {
		return fmt.Errorf("openapi: marshal v3 index: %w", err)
	}
	s.v3Index, s.v3IndexHash = newBlob(raw), hash(raw)
	return nil
}

// v2Proto converts a Swagger 2.0 JSON document to gnostic's protobuf.
func v2Proto(raw []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi: parse v2: %w", err)
	}
	pb, err := proto.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: v2 to protobuf: %w", err)
	}
	return pb, nil
}

// v3Proto converts an OpenAPI 3 JSON document to gnostic's protobuf.
func v3Proto(raw []byte) ([]byte, error) {
	doc, err := openapiv3.ParseDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi: parse v3: %w", err)
	}
	pb, err := proto.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: v3 to protobuf: %w", err)
	}
	return pb, nil
}

func hash(b []byte) string {
	return fmt.Sprintf("%X", sha512.Sum512(b))
}

// V2 returns the Swagger 2.0 document as JSON.
func (s *Spec) V2() []byte { return s.v2JSON.raw }

// V3 returns the OpenAPI v3 document of a group version path ("api/v1",
// "apis/apps/v1") as JSON.
func (s *Spec) V3(gvPath string) ([]byte, bool) {
	d, ok := s.v3[gvPath]
	if !ok {
		return nil, false
	}
	return d.json.raw, true
}

// Schema returns the v3 schema of a served kind (or its list kind, or a
// subresource kind such as autoscaling/v1 Scale), as the documents
// publish it under components.schemas.
func (s *Spec) Schema(gvk schema.GroupVersionKind) (map[string]any, bool) {
	name, ok := s.kindDefs[gvk]
	if !ok {
		return nil, false
	}
	return renderDefinition(s.models.defs[name], renderV3), true
}

// DefinitionName returns the name of the definition of a served kind
// ("io.k8s.api.core.v1.Pod").
func (s *Spec) DefinitionName(gvk schema.GroupVersionKind) (string, bool) {
	name, ok := s.kindDefs[gvk]
	return name, ok
}
