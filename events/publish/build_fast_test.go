package publish

import (
	"github.com/cairn-dev/cairn/events"

	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestFillObjectFastMatchesSlow checks the spliced object against the one
// the general path rebuilds, and that the fast path declines what it cannot
// handle.
func TestFillObjectFastMatchesSlow(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		wantFast bool
	}{
		{"pod", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"d","uid":"u1"},"spec":{"nodeName":"n1","containers":[{"name":"c"}]}}`, true},
		{"empty metadata", `{"kind":"ConfigMap","apiVersion":"v1","metadata":{},"data":{"a":"b"}}`, true},
		{"apps", `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d","uid":"u2","labels":{"x":"y"}},"spec":{"replicas":2}}`, true},
		{"has resourceVersion", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"7"}}`, false},
		{"nested object first", `{"spec":{"metadata":{"x":1}},"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`, false},
		{"tricky string", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","annotations":{"a":"\"metadata\":{"}}}`, true},
		{"controlled", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","ownerReferences":[{"name":"other"},{"name":"rs-1","controller":true}]}}`, true},
		{"controlled, slow", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"3","ownerReferences":[{"name":"rs-1","controller":true}]}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fast := &events.Event{Revision: 42, Resource: "pods"}
			fastCtl, got := fillObjectFast(fast, []byte(tt.raw))
			if got != tt.wantFast {
				t.Fatalf("fast path taken = %v, want %v", got, tt.wantFast)
			}
			slow := &events.Event{Revision: 42, Resource: "pods"}
			slowCtl, err := fillObject(slow, []byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			var want string
			if strings.Contains(tt.raw, "rs-1") {
				want = "rs-1"
			}
			if slowCtl != want {
				t.Errorf("controller %q, want %q", slowCtl, want)
			}
			if !got {
				return
			}
			if fastCtl != want {
				t.Errorf("fast path: controller %q, want %q", fastCtl, want)
			}
			var a, b any
			if err := json.Unmarshal(fast.Object, &a); err != nil {
				t.Fatalf("fast object is not JSON: %v: %s", err, fast.Object)
			}
			_ = json.Unmarshal(slow.Object, &b)
			if !reflect.DeepEqual(a, b) || fast.Kind != slow.Kind || fast.Version != slow.Version || fast.UID != slow.UID || fast.NodeName != slow.NodeName {
				t.Errorf("fast %s %+v\nslow %s %+v", fast.Object, fast, slow.Object, slow)
			}
			env, err := encodeEnvelope(fast)
			if err != nil {
				t.Fatal(err)
			}
			var back events.Event
			if err := json.Unmarshal(env, &back); err != nil || back.Revision != 42 {
				t.Fatalf("envelope does not decode: %v %s", err, env)
			}
		})
	}
}
