package consumer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestClientsetUserAgent: the clientset sends the configured User-Agent,
// or client-go's default, never Go's: the apiserver names field managers
// after it.
func TestClientsetUserAgent(t *testing.T) {
	var mu sync.Mutex
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.UserAgent()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()
	for _, tt := range []struct{ set, want string }{
		{"", rest.DefaultKubernetesUserAgent()},
		{"cairn-test", "cairn-test"},
	} {
		cs, err := NewClientset(&rest.Config{Host: srv.URL, UserAgent: tt.set}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "x", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if got != tt.want {
			t.Errorf("UserAgent %q sent as %q, want %q", tt.set, got, tt.want)
		}
		mu.Unlock()
		cs.CoreV1().RESTClient().(*rest.RESTClient).Client.CloseIdleConnections()
	}
}
