package openapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/openapi"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	protomodels "k8s.io/kube-openapi/pkg/util/proto"
)

// TestRegistry builds the documents of every kind cairn serves and reads
// them back through client-go in every format.
func TestRegistry(t *testing.T) {
	all := schemas.NewRegistry().All()
	s, err := openapi.Build(all)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})

	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	models, err := protomodels.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	root := openapi3.NewRoot(dc.OpenAPIV3())
	for _, r := range all {
		name, ok := s.DefinitionName(r.GVK())
		if !ok {
			t.Errorf("%s: no definition", r.GVK())
			continue
		}
		if models.LookupModel(name) == nil {
			t.Errorf("%s: %s not in v2", r.GVK(), name)
		}
		gvDoc, err := root.GVSpec(r.GroupVersion)
		if err != nil {
			t.Errorf("%s: v3: %v", r.GVK(), err)
			continue
		}
		if gvDoc.Components.Schemas[name] == nil {
			t.Errorf("%s: %s not in v3", r.GVK(), name)
		}
		pb, err := dc.OpenAPIV3().Paths()
		if err != nil {
			t.Fatal(err)
		}
		gvPath := "api/" + r.GroupVersion.Version
		if r.GroupVersion.Group != "" {
			gvPath = "apis/" + r.GroupVersion.String()
		}
		if _, err := pb[gvPath].Schema(openapi.MediaTypeV3Proto); err != nil {
			t.Errorf("%s: v3 protobuf: %v", r.GVK(), err)
		}
	}
	t.Logf("%d kinds, v2 document %d bytes", len(all), len(s.V2()))
}
