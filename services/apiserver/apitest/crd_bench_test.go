package apitest

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// Sizes of the custom resource benchmark.
const (
	crdBenchObjects = 2000 // per round
	crdBenchClients = 16
	crdBenchFields  = 50
)

// benchCRD is a definition whose spec has crdBenchFields fields (integers
// with bounds, strings with a pattern, alternating) and 3 CEL rules.
func benchCRD() *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := range crdBenchFields {
		name := fmt.Sprintf("f%02d", i)
		if i%2 == 0 {
			props[name] = apiextensionsv1.JSONSchemaProps{Type: "integer", Minimum: ptrFloat(0), Maximum: ptrFloat(1e6)}
		} else {
			props[name] = apiextensionsv1.JSONSchemaProps{Type: "string", Pattern: "^[a-z0-9-]+$", MaxLength: ptrInt(64)}
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.bench.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "bench.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: props, XValidations: apiextensionsv1.ValidationRules{
							{Rule: "self.f00 <= self.f02", Message: "f00 must not exceed f02"},
							{Rule: "self.f01.size() > 0", Message: "f01 must not be empty"},
							{Rule: "self.f04 + self.f06 < 2000000", Message: "f04 and f06 too large"},
						}},
					}}}}},
		},
	}
}

func ptrFloat(f float64) *float64 { return &f }
func ptrInt(n int64) *int64       { return &n }

func widgetBody(name string) []byte {
	var spec bytes.Buffer
	for i := range crdBenchFields {
		if i > 0 {
			spec.WriteByte(',')
		}
		if i%2 == 0 {
			fmt.Fprintf(&spec, `"f%02d":%d`, i, i*10)
		} else {
			fmt.Fprintf(&spec, `"f%02d":"v-%d"`, i, i)
		}
	}
	return fmt.Appendf(nil, `{"apiVersion":"bench.example.com/v1","kind":"Widget","metadata":{"name":%q},"spec":{%s}}`, name, spec.String())
}

func benchPodBody(name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, name)
}

// BenchmarkCRD creates custom objects of a 50-field schema with 3 CEL
// rules, and pods, through the full path on one control plane, in rounds
// pods, widgets, widgets, pods (so both see the same machine load), with
// 16 concurrent clients. It reports creates/s of each and their ratio.
// Run it with -benchtime=1x (go tool task bench:crd).
func BenchmarkCRD(b *testing.B) {
	for i := 0; i < b.N; i++ {
		env := controlplanetest.Start(b, controlplanetest.Options{Fsync: true})
		establish(b, env, benchCRD())
		var took [2]time.Duration
		for round, kind := range []int{0, 1, 1, 0} { // 0: pods, 1: widgets
			path, body := "/api/v1/namespaces/default/pods", benchPodBody
			if kind == 1 {
				path, body = "/apis/bench.example.com/v1/namespaces/default/widgets", widgetBody
			}
			took[kind] += createMany(b, env, path, fmt.Sprintf("r%d-", round), body)
		}
		pods := float64(2*crdBenchObjects) / took[0].Seconds()
		widgets := float64(2*crdBenchObjects) / took[1].Seconds()
		b.ReportMetric(pods, "pod-creates/s")
		b.ReportMetric(widgets, "cr-creates/s")
		b.ReportMetric(widgets/pods, "cr/pod")
	}
}

// createMany POSTs crdBenchObjects objects with crdBenchClients clients
// and returns how long it took; any answer but 201 fails b.
func createMany(b *testing.B, env *controlplanetest.Env, path, prefix string, body func(string) []byte) time.Duration {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range crdBenchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > crdBenchObjects {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, env.URL+path, bytes.NewReader(body(fmt.Sprintf("%s%d", prefix, n))))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+controlplanetest.AdminToken)
				resp, err := httpClient.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Store(fmt.Sprintf("%s: %d", path, resp.StatusCode))
					return
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatalf("create: %v", f)
	}
	return time.Since(start)
}
