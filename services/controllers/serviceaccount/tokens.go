package serviceaccount

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// tokens is kube's tokens-controller, for Secrets only (it never makes a
// Secret for a ServiceAccount).
type tokens struct {
	log      *slog.Logger
	client   kubernetes.Interface
	signer   *satoken.Tokens
	rootCA   []byte
	accounts *consumer.Cache[*corev1.ServiceAccount]
	secrets  *consumer.Cache[*corev1.Secret]
}

const indexTokenOf = "serviceaccount-token-of"

func newTokens(m *consumer.Manager, opts Options, signer *satoken.Tokens, accounts *consumer.Cache[*corev1.ServiceAccount]) (*tokens, error) {
	t := &tokens{log: m.Log().With("controller", TokensName), client: m.Client(), signer: signer, rootCA: opts.RootCA, accounts: accounts}
	var err error
	t.secrets, err = consumer.CacheFor[*corev1.Secret](m, secretsResource, consumer.WithIndexers(map[string]consumer.IndexFunc[*corev1.Secret]{
		indexTokenOf: func(s *corev1.Secret) []string {
			if s.Type != corev1.SecretTypeServiceAccountToken {
				return nil
			}
			return []string{s.Namespace + "/" + s.Annotations[corev1.ServiceAccountNameKey]}
		}}))
	if err != nil {
		return nil, fmt.Errorf("serviceaccount: new: %w", err)
	}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: TokensName, Reconciler: t, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{accounts, t.secrets}})
	if err != nil {
		return nil, fmt.Errorf("serviceaccount: new: %w", err)
	}
	consumer.For(t.secrets, ctrl, func(s *corev1.Secret) []string {
		if s.Type != corev1.SecretTypeServiceAccountToken {
			return nil
		}
		return []string{consumer.KeyOf(s)}
	})
	// A ServiceAccount's change (its deletion above all) revisits its
	// token Secrets.
	consumer.For(accounts, ctrl, func(sa *corev1.ServiceAccount) []string {
		var keys []string
		for _, s := range t.secrets.ByIndex(indexTokenOf, sa.Namespace+"/"+sa.Name) {
			keys = append(keys, consumer.KeyOf(s))
		}
		return keys
	})
	return t, nil
}

var _ consumer.Reconciler = (*tokens)(nil)

// Reconcile fills or deletes the token Secret req.Key (kube's syncSecret).
func (t *tokens) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	s, ok := t.secrets.Get(ns, name)
	if !ok || s.Type != corev1.SecretTypeServiceAccountToken || s.DeletionTimestamp != nil {
		return consumer.Result{}, nil
	}
	saName := s.Annotations[corev1.ServiceAccountNameKey]
	sa, ok := t.accounts.Get(ns, saName)
	if ok && sa.DeletionTimestamp == nil {
		if uid := s.Annotations[corev1.ServiceAccountUIDKey]; uid == "" || types.UID(uid) == sa.UID {
			return consumer.Result{}, t.fill(ctx, s, sa)
		}
	}
	// The ServiceAccount is gone, or this Secret was for an older one of
	// the name: check the apiserver before deleting.
	live, err := t.client.CoreV1().ServiceAccounts(ns).Get(ctx, saName, metav1.GetOptions{})
	if err == nil && (s.Annotations[corev1.ServiceAccountUIDKey] == "" || types.UID(s.Annotations[corev1.ServiceAccountUIDKey]) == live.UID) {
		return consumer.Result{}, t.fill(ctx, s, live)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return consumer.Result{}, fmt.Errorf("serviceaccount: get %s/%s: %w", ns, saName, err)
	}
	t.log.Info("deleting token secret of a missing service account", "secret", req.Key, "serviceaccount", saName)
	err = t.client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return consumer.Result{}, fmt.Errorf("serviceaccount: delete %s: %w", req.Key, err)
	}
	return consumer.Result{}, nil
}

// fill gives the Secret its token, ca.crt, namespace and the
// ServiceAccount's UID, unless it has them.
func (t *tokens) fill(ctx context.Context, s *corev1.Secret, sa *corev1.ServiceAccount) error {
	needCA := len(t.rootCA) > 0 && string(s.Data[corev1.ServiceAccountRootCAKey]) != string(t.rootCA)
	if len(s.Data[corev1.ServiceAccountTokenKey]) > 0 && !needCA && string(s.Data[corev1.ServiceAccountNamespaceKey]) == s.Namespace &&
		s.Annotations[corev1.ServiceAccountUIDKey] == string(sa.UID) {
		return nil
	}
	upd := s.DeepCopy()
	if upd.Data == nil {
		upd.Data = map[string][]byte{}
	}
	if len(upd.Data[corev1.ServiceAccountTokenKey]) == 0 {
		tok, err := t.signer.LegacyToken(sa, s)
		if err != nil {
			return consumer.TerminalError(fmt.Errorf("serviceaccount: sign %s/%s: %w", s.Namespace, s.Name, err))
		}
		upd.Data[corev1.ServiceAccountTokenKey] = []byte(tok)
	}
	if len(t.rootCA) > 0 {
		upd.Data[corev1.ServiceAccountRootCAKey] = t.rootCA
	}
	upd.Data[corev1.ServiceAccountNamespaceKey] = []byte(s.Namespace)
	upd.Annotations[corev1.ServiceAccountUIDKey] = string(sa.UID)
	_, err := t.client.CoreV1().Secrets(s.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("serviceaccount: update %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}
