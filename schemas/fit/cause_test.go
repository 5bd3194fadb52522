package fit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOvercommitted(t *testing.T) {
	lacks := []Insufficient{{corev1.ResourcePods, ReasonTooManyPods, 1, 3, 3}, {corev1.ResourceCPU, ReasonInsufficientCPU, 200, 600, 700}}
	err := Overcommitted(corev1.Resource("pods"), "web", "n1", lacks)
	// As a client sees it: the Status the apiserver writes, decoded.
	body, jerr := json.Marshal(err.Status())
	if jerr != nil {
		t.Fatal(jerr)
	}
	var st metav1.Status
	if jerr := json.Unmarshal(body, &st); jerr != nil {
		t.Fatal(jerr)
	}
	got := &apierrors.StatusError{ErrStatus: st}
	if st.Code != http.StatusConflict || !apierrors.IsConflict(got) {
		t.Errorf("code %d, reason %s; want 409 Conflict", st.Code, st.Reason)
	}
	wantMsg := `Operation cannot be fulfilled on pods "web": binding rejected: node n1: Too many pods (requested 1, allocated 3 of 3), Insufficient cpu (requested 200, allocated 600 of 700)`
	if st.Message != wantMsg {
		t.Errorf("message %q, want %q", st.Message, wantMsg)
	}
	wantCauses := []metav1.StatusCause{
		{Type: CauseOvercommitted, Field: "target.name", Message: "Too many pods (requested 1, allocated 3 of 3)"},
		{Type: CauseOvercommitted, Field: "target.name", Message: "Insufficient cpu (requested 200, allocated 600 of 700)"},
	}
	if st.Details == nil || !reflect.DeepEqual(st.Details.Causes, wantCauses) {
		t.Errorf("details %+v, want causes %+v", st.Details, wantCauses)
	}
}

func TestIsOvercommitted(t *testing.T) {
	over := Overcommitted(corev1.Resource("pods"), "web", "n1", []Insufficient{{corev1.ResourcePods, ReasonTooManyPods, 1, 0, 0}})
	// A conflict whose message reads like a refusal is not one.
	lookalike := apierrors.NewConflict(corev1.Resource("pods"), "web", errors.New("binding rejected: node n1: Too many pods"))
	tooMany := apierrors.NewTooManyRequests("slow down", 1)
	tooMany.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: CauseOvercommitted}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"refusal", over, true},
		{"wrapped refusal", fmt.Errorf("bind: %w", over), true},
		{"other conflict", lookalike, false},
		{"cause on another code", tooMany, false},
		{"not found", apierrors.NewNotFound(corev1.Resource("pods"), "web"), false},
		{"plain error", errors.New("boom"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsOvercommitted(tt.err); got != tt.want {
				t.Errorf("IsOvercommitted = %v, want %v", got, tt.want)
			}
		})
	}
}
