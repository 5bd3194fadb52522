package serviceaccount

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// Names of the controllers in logs and metrics.
const (
	Name       = "serviceaccount"
	TokensName = "serviceaccount-token"
)

// DescriptionAnnotation is the description kube puts on kube-root-ca.crt.
const (
	descriptionKey    = "kubernetes.io/description"
	rootCADescription = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)

var (
	namespacesResource      = corev1.SchemeGroupVersion.WithResource("namespaces")
	serviceAccountsResource = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	configMapsResource      = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretsResource         = corev1.SchemeGroupVersion.WithResource("secrets")
)

// Options configure the controllers.
type Options struct {
	// Workers is the number of keys each controller handles at once; 0
	// means 5.
	Workers int
	// RootCA is the CA bundle published as kube-root-ca.crt
	// (kube-controller-manager's --root-ca-file); nil takes the CA of
	// the manager's rest.Config, as kube does. Empty publishes nothing.
	RootCA []byte
	// KeyDir holds the cluster's service-account signing key
	// (pki.LoadServiceAccountKeys), which signs the tokens of
	// kubernetes.io/service-account-token Secrets (kube-controller-manager's
	// --service-account-private-key-file); empty runs no tokens
	// controller.
	KeyDir string
}

// Controller is the serviceaccount and root-CA controllers (one key per
// namespace), with the tokens controller beside them. Build it with New;
// its Manager runs it.
type Controller struct {
	log        *slog.Logger
	client     kubernetes.Interface
	rootCA     []byte
	namespaces *consumer.Cache[*corev1.Namespace]
	accounts   *consumer.Cache[*corev1.ServiceAccount]
	configMaps *consumer.Cache[*corev1.ConfigMap]
	tokens     *tokens
}

// New builds the controllers on m's caches and client.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	if opts.RootCA == nil {
		opts.RootCA = rootCAOf(m)
	}
	c := &Controller{log: m.Log().With("controller", Name), client: m.Client(), rootCA: opts.RootCA}
	var err error
	if c.namespaces, err = consumer.CacheFor[*corev1.Namespace](m, namespacesResource); err != nil {
		return nil, fmt.Errorf("serviceaccount: new: %w", err)
	}
	if c.accounts, err = consumer.CacheFor[*corev1.ServiceAccount](m, serviceAccountsResource); err != nil {
		return nil, fmt.Errorf("serviceaccount: new: %w", err)
	}
	if c.configMaps, err = consumer.CacheFor[*corev1.ConfigMap](m, configMapsResource); err != nil {
		return nil, fmt.Errorf("serviceaccount: new: %w", err)
	}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{c.namespaces, c.accounts, c.configMaps}})
	if err != nil {
		return nil, fmt.Errorf("serviceaccount: new: %w", err)
	}
	consumer.For(c.namespaces, ctrl, func(ns *corev1.Namespace) []string { return []string{ns.Name} })
	consumer.For(c.accounts, ctrl, func(sa *corev1.ServiceAccount) []string {
		if sa.Name != satoken.DefaultServiceAccountName {
			return nil
		}
		return []string{sa.Namespace}
	})
	consumer.For(c.configMaps, ctrl, func(cm *corev1.ConfigMap) []string {
		if cm.Name != satoken.RootCAConfigMap {
			return nil
		}
		return []string{cm.Namespace}
	})
	if opts.KeyDir != "" {
		keys, err := pki.LoadServiceAccountKeys(opts.KeyDir)
		if err != nil {
			return nil, fmt.Errorf("serviceaccount: new: %w", err)
		}
		signer, err := satoken.NewTokens("", nil, keys, nil)
		if err != nil {
			return nil, fmt.Errorf("serviceaccount: new: %w", err)
		}
		if c.tokens, err = newTokens(m, opts, signer, c.accounts); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// rootCAOf is the CA the manager's client trusts.
func rootCAOf(m *consumer.Manager) []byte {
	rc := m.RestConfig()
	if rc == nil {
		return nil
	}
	return rc.TLSClientConfig.CAData
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile makes the namespace req.Key hold its default ServiceAccount and
// its kube-root-ca.crt ConfigMap, unless it is gone or terminating.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, ok := c.namespaces.Get("", req.Key)
	if !ok || ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return consumer.Result{}, nil
	}
	if err := c.ensureDefault(ctx, ns.Name); err != nil {
		return consumer.Result{}, err
	}
	return consumer.Result{}, c.publishRootCA(ctx, ns.Name)
}

// ensureDefault is kube's ServiceAccountsController.syncNamespace.
func (c *Controller) ensureDefault(ctx context.Context, ns string) error {
	if _, ok := c.accounts.Get(ns, satoken.DefaultServiceAccountName); ok {
		return nil
	}
	_, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: satoken.DefaultServiceAccountName}}, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.log.Info("created default service account", "namespace", ns)
	case apierrors.IsAlreadyExists(err):
	case apierrors.IsForbidden(err), apierrors.IsNotFound(err):
		// The namespace is being deleted (or just was).
	default:
		return fmt.Errorf("serviceaccount: create %s/default: %w", ns, err)
	}
	return nil
}

// publishRootCA is kube's root-ca-cert-publisher syncNamespace.
func (c *Controller) publishRootCA(ctx context.Context, ns string) error {
	if len(c.rootCA) == 0 {
		return nil
	}
	cms := c.client.CoreV1().ConfigMaps(ns)
	cm, ok := c.configMaps.Get(ns, satoken.RootCAConfigMap)
	if !ok {
		_, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: satoken.RootCAConfigMap, Annotations: map[string]string{descriptionKey: rootCADescription}},
			Data:       map[string]string{satoken.RootCAKey: string(c.rootCA)}}, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err), apierrors.IsForbidden(err), apierrors.IsNotFound(err):
			return nil
		default:
			return fmt.Errorf("serviceaccount: create %s/%s: %w", ns, satoken.RootCAConfigMap, err)
		}
	}
	if bytes.Equal([]byte(cm.Data[satoken.RootCAKey]), c.rootCA) && len(cm.Data) == 1 && cm.Annotations[descriptionKey] == rootCADescription {
		return nil
	}
	upd := cm.DeepCopy()
	upd.Data = map[string]string{satoken.RootCAKey: string(c.rootCA)}
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	upd.Annotations[descriptionKey] = rootCADescription
	_, err := cms.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("serviceaccount: update %s/%s: %w", ns, satoken.RootCAConfigMap, err)
	}
	if apierrors.IsConflict(err) {
		return err // the newer version comes through the log; retry on it
	}
	return nil
}
