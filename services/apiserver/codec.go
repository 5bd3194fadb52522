package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/codec"
)

// MaxBodyBytes is the largest request body accepted, as kube-apiserver's
// 3 MiB limit.
const MaxBodyBytes = 3 << 20

// readBody reads the request body, enforcing MaxBodyBytes, and converts
// YAML to JSON. It returns 413 or 415 Status errors.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, errBadRequest("request body is empty")
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, errBadRequest("reading request body: %v", err)
	}
	if len(b) > MaxBodyBytes {
		return nil, errEntityTooLarge(MaxBodyBytes)
	}
	ct := mediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "", "application/json", "*/*",
		"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json",
		applyPatchType: // YAML or JSON, decoded by decodeApply
		return b, nil
	case protobufMediaType:
		return protobufToJSON(b)
	case "application/yaml", "application/x-yaml", "text/yaml":
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			return nil, errBadRequest("error decoding YAML: %v", err)
		}
		return j, nil
	default:
		return nil, errUnsupportedMedia(ct)
	}
}

func mediaType(ct string) string {
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

// decodeObject decodes JSON into a new object of res. strict rejects unknown
// and duplicate fields as fieldValidation=Strict does.
func decodeObject(res *schemas.Resource, body []byte, strict bool) (schemas.Object, error) {
	var obj schemas.Object
	if res.Custom != nil {
		u, err := decodeCustom(body) // crd.go
		if err != nil {
			return nil, err
		}
		obj = u
	} else {
		obj = res.New()
		if err := decodeInto(body, obj, strict); err != nil {
			return nil, err
		}
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	want := res.GVK()
	if gvk.Kind != "" && gvk.Kind != want.Kind || gvk.Version != "" && gvk.GroupVersion() != want.GroupVersion() {
		return nil, errBadRequest("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion().String(), want.GroupVersion().String())
	}
	obj.GetObjectKind().SetGroupVersionKind(want)
	return obj, nil
}

func decodeInto(body []byte, into any, strict bool) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errBadRequest("the body of the request is not a JSON object")
	}
	if !strict {
		// codec decodes as sigs.k8s.io/json does (case-sensitive names,
		// the last of duplicate names wins), about twice as fast.
		if err := codec.Unmarshal(body, into); err != nil {
			return errBadRequest("error decoding request body: %v", err)
		}
		return nil
	}
	strictErrs, err := sigsjson.UnmarshalStrict(body, into)
	if err != nil {
		return errBadRequest("error decoding request body: %v", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return errBadRequest("strict decoding error: %s", strings.Join(msgs, ", "))
	}
	return nil
}

// encodeStored renders an object for etcd: JSON with apiVersion and kind,
// without resourceVersion (the key's ModRevision is the resourceVersion).
// A custom resource is stored in its storage version (gvk) and keeps the
// version it was written in.
func encodeStored(obj schemas.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	orig := obj.GetObjectKind().GroupVersionKind()
	if orig.Empty() {
		orig = gvk
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	rv := obj.GetResourceVersion()
	obj.SetResourceVersion("")
	b, err := json.Marshal(obj)
	obj.SetResourceVersion(rv)
	obj.GetObjectKind().SetGroupVersionKind(orig)
	if err != nil {
		return nil, fmt.Errorf("apiserver: encode %s: %w", gvk.Kind, err)
	}
	return b, nil
}

// outputFormat is what a client asked for in Accept.
type outputFormat struct {
	// proto: the client prefers Kubernetes protobuf (client-go's default
	// for built-in kinds); single objects and lists are sent that way.
	proto         bool
	table         bool
	partialMeta   bool
	includeObject metav1.IncludeObjectPolicy
}

var errNotAcceptableFormat = errors.New("apiserver: not acceptable")

// negotiate reads Accept. kubectl get asks for
// application/json;as=Table;v=v1;g=meta.k8s.io first, then plain JSON.
func negotiate(r *http.Request) (outputFormat, error) {
	f, err := acceptFormats.parse(r.Header.Get("Accept"))
	f.includeObject = metav1.IncludeMetadata
	if strings.Contains(r.URL.RawQuery, "includeObject") {
		if p := r.URL.Query().Get("includeObject"); p != "" {
			f.includeObject = metav1.IncludeObjectPolicy(p)
		}
	}
	return f, err
}

// acceptCache remembers what Accept headers ask for: clients send a handful
// of distinct values, and parsing one allocates for every media type in it,
// on every request. It holds at most acceptCacheSize values; others are
// parsed each time.
type acceptCache struct {
	mu sync.RWMutex
	m  map[string]acceptResult
}

type acceptResult struct {
	f   outputFormat
	err error
}

const acceptCacheSize = 64

var acceptFormats = &acceptCache{m: map[string]acceptResult{}}

func (c *acceptCache) parse(accept string) (outputFormat, error) {
	c.mu.RLock()
	res, ok := c.m[accept]
	c.mu.RUnlock()
	if ok {
		return res.f, res.err
	}
	f, err := parseAccept(accept)
	c.mu.Lock()
	if len(c.m) < acceptCacheSize {
		c.m[accept] = acceptResult{f, err}
	}
	c.mu.Unlock()
	return f, err
}

// parseAccept is negotiate's reading of an Accept header (includeObject
// aside).
func parseAccept(accept string) (outputFormat, error) {
	var f outputFormat
	if accept == "" {
		return f, nil
	}
	sawJSON := false
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "application/yaml", "*/*", "application/*", "application/json-seq", protobufMediaType:
		default:
			continue
		}
		switch params["as"] {
		case "Table":
			if params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
				f.table = true
				return f, nil
			}
			continue
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			if params["g"] == "meta.k8s.io" && params["v"] == "v1" {
				f.partialMeta = true
				return f, nil
			}
			continue
		case "":
			if mt == protobufMediaType {
				f.proto = true
			}
			sawJSON = true
		}
		if sawJSON {
			return f, nil
		}
	}
	if !sawJSON {
		return f, errNotAcceptableFormat
	}
	return f, nil
}

const protobufMediaType = "application/vnd.kubernetes.protobuf"

// protoCodec decodes Kubernetes protobuf envelopes ("k8s\x00" + Unknown),
// which client-go sends by default for built-in kinds.
// It knows client-go's kinds and CustomResourceDefinitions (whose
// clientset sends its DeleteOptions as protobuf).
var protoCodec = func() *protobuf.Serializer {
	s := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return protobuf.NewSerializer(s, s)
}()

// protobufToJSON converts a protobuf request body to the JSON the rest of
// the request path works on; responses are JSON, which client-go accepts.
func protobufToJSON(b []byte) ([]byte, error) {
	obj, gvk, err := protoCodec.Decode(b, nil, nil)
	if err != nil {
		return nil, errBadRequest("error decoding protobuf body: %v", err)
	}
	if gvk != nil {
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
	}
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, errBadRequest("error converting protobuf body: %v", err)
	}
	return j, nil
}

// writeProto writes obj as a Kubernetes protobuf envelope.
func writeProto(w http.ResponseWriter, code int, obj runtime.Object) {
	var buf bytes.Buffer
	if err := protoCodec.Encode(obj, &buf); err != nil {
		// Not every object has a protobuf form; JSON always works.
		writeJSON(w, code, obj)
		return
	}
	w.Header().Set("Content-Type", protobufMediaType)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// decodeRequestObject decodes the request body into a new object of res:
// protobuf directly (client-go's default), JSON and YAML through
// decodeObject.
func decodeRequestObject(r *http.Request, res *schemas.Resource, strict bool) (schemas.Object, error) {
	if mediaType(r.Header.Get("Content-Type")) != protobufMediaType {
		body, err := readBody(r)
		if err != nil {
			return nil, err
		}
		return decodeObject(res, body, strict)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, errBadRequest("reading request body: %v", err)
	}
	if len(b) > MaxBodyBytes {
		return nil, errEntityTooLarge(MaxBodyBytes)
	}
	into := res.New()
	out, gvk, err := protoCodec.Decode(b, nil, into)
	if err != nil {
		return nil, errBadRequest("error decoding protobuf body: %v", err)
	}
	obj, ok := out.(schemas.Object)
	if !ok || out != runtime.Object(into) {
		return nil, errBadRequest("the body of the request is not a %s", res.Kind)
	}
	want := res.GVK()
	if gvk != nil && (gvk.Kind != want.Kind || gvk.GroupVersion() != want.GroupVersion()) {
		return nil, errBadRequest("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion().String(), want.GroupVersion().String())
	}
	obj.GetObjectKind().SetGroupVersionKind(want)
	return obj, nil
}
