package kubelet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The kubelet's service-account token manager (kube's pkg/kubelet/token):
// the tokens of pods' serviceAccountToken projections, requested through
// the TokenRequest API bound to the pod, cached, and fetched again once
// 80% of their lifetime (less a jitter) or 24 hours passed. A refresh that
// fails keeps the cached token until it expires.
const (
	tokenMaxTTL    = 24 * time.Hour
	tokenMaxJitter = 10 * time.Second
)

type tokenManager struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]*authenticationv1.TokenRequest
}

func newTokenManager(client kubernetes.Interface, now func() time.Time) *tokenManager {
	return &tokenManager{client: client, now: now, cache: map[string]*authenticationv1.TokenRequest{}}
}

func tokenKey(namespace, name string, tr *authenticationv1.TokenRequest) string {
	var exp int64
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	return fmt.Sprintf("%q/%q/%#v/%d/%#v", namespace, name, tr.Spec.Audiences, exp, *tr.Spec.BoundObjectRef)
}

// token returns a token for the ServiceAccount name in namespace as tr
// asks, from the cache unless it needs a refresh.
func (m *tokenManager) token(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := tokenKey(namespace, name, tr)
	m.mu.Lock()
	cached, ok := m.cache[key]
	m.mu.Unlock()
	if ok && !m.requiresRefresh(cached) {
		return cached, nil
	}
	fresh, err := m.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		switch {
		case !ok:
			return nil, fmt.Errorf("failed to fetch token: %w", err)
		case !m.now().Before(cached.Status.ExpirationTimestamp.Time):
			return nil, fmt.Errorf("token %s expired and refresh failed: %w", key, err)
		}
		return cached, nil
	}
	m.mu.Lock()
	m.cache[key] = fresh
	m.mu.Unlock()
	return fresh, nil
}

// needsRefresh reports whether any token of the pod's projections is due.
func (m *tokenManager) needsRefresh(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken == nil {
				continue
			}
			tr := podTokenRequest(pod, src.ServiceAccountToken)
			m.mu.Lock()
			cached, ok := m.cache[tokenKey(pod.Namespace, pod.Spec.ServiceAccountName, tr)]
			m.mu.Unlock()
			if !ok || m.requiresRefresh(cached) {
				return true
			}
		}
	}
	return false
}

// requiresRefresh is kube's: past 24 hours, or within 20% of the lifetime
// of the expiry, less a jitter of up to 10 s.
func (m *tokenManager) requiresRefresh(tr *authenticationv1.TokenRequest) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	now := m.now()
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	iat := exp.Add(-ttl)
	jitter := time.Duration(rand.Float64() * float64(tokenMaxJitter))
	if now.After(iat.Add(tokenMaxTTL - jitter)) {
		return true
	}
	return now.After(exp.Add(-ttl*20/100 - jitter))
}

// forgetPod drops the tokens bound to the pod.
func (m *tokenManager) forgetPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, tr := range m.cache {
		if ref := tr.Spec.BoundObjectRef; ref != nil && ref.UID == uid {
			delete(m.cache, k)
		}
	}
}

// podTokenRequest is what the projected volume plugin asks for: a token of
// the projection's audience (the apiserver's if none) and lifetime, bound
// to the pod.
func podTokenRequest(pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) *authenticationv1.TokenRequest {
	var auds []string
	if p.Audience != "" {
		auds = []string{p.Audience}
	}
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         auds,
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
}
