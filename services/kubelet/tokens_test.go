package kubelet

import (
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTokenRequiresRefresh: a token is fetched again once 80% of its
// lifetime passed (less up to 10 s of jitter) or, for long ones, after 24
// hours, as kube's token manager does.
func TestTokenRequiresRefresh(t *testing.T) {
	iat := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		after time.Duration
		want  bool
	}{
		{"fresh hour token", time.Hour, time.Minute, false},
		{"hour token at 79%", time.Hour, 47*time.Minute + 20*time.Second - tokenMaxJitter - time.Second, false},
		{"hour token at 81%", time.Hour, 48*time.Minute + 40*time.Second, true},
		{"admission's 3607 s token before 80%", 3607 * time.Second, 40 * time.Minute, false},
		{"admission's 3607 s token after 80%", 3607 * time.Second, 49 * time.Minute, true},
		{"year token at 1 day - 1 min", 365 * 24 * time.Hour, 24*time.Hour - time.Minute, false},
		{"year token past 24 h", 365 * 24 * time.Hour, 24 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := iat.Add(tc.after)
			m := newTokenManager(nil, func() time.Time { return now })
			secs := int64(tc.ttl / time.Second)
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
				Status: authenticationv1.TokenRequestStatus{ExpirationTimestamp: metav1.NewTime(iat.Add(tc.ttl))}}
			for range 20 { // the jitter is random: the answer must not depend on it here
				if got := m.requiresRefresh(tr); got != tc.want {
					t.Fatalf("requiresRefresh after %v of %v = %v, want %v", tc.after, tc.ttl, got, tc.want)
				}
			}
		})
	}
}
