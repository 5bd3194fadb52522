package certificates

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas"
)

// ApproverName is the approver's name in logs and metrics.
const ApproverName = "csrapproving"

// recognizer is one kind of request the approver approves: what it looks
// like, and the subresource whose create its requestor must be allowed.
type recognizer struct {
	recognize   func(c *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool
	subresource string
	message     string
}

var recognizers = []recognizer{
	{isSelfNodeClient, "selfnodeclient", "Auto approving self kubelet client certificate after SubjectAccessReview."},
	{isNodeClient, "nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview."},
	{isKubeProxyClient, "kubeproxyclient", "Auto approving kube-proxy client certificate after SubjectAccessReview."},
}

func isNodeClient(c *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return c.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && validateKubeletClient(req, c.Spec.Usages) == nil
}

func isSelfNodeClient(c *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return isNodeClient(c, req) && c.Spec.Username == req.Subject.CommonName
}

// Approver is the CSR approver. Build it with NewApprover; its Manager
// runs it.
type Approver struct {
	log    *slog.Logger
	client kubernetes.Interface
	csrs   *consumer.Cache[*certificatesv1.CertificateSigningRequest]
}

// NewApprover builds the approver on m.
func NewApprover(m *consumer.Manager) (*Approver, error) {
	csrs, err := consumer.CacheFor[*certificatesv1.CertificateSigningRequest](m, csrResource)
	if err != nil {
		return nil, fmt.Errorf("certificates: approver: %w", err)
	}
	a := &Approver{log: m.Log().With("controller", ApproverName), client: m.Client(), csrs: csrs}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: ApproverName, Reconciler: a, Workers: 2,
		WaitFor: []consumer.Syncer{csrs}})
	if err != nil {
		return nil, fmt.Errorf("certificates: approver: %w", err)
	}
	consumer.For(csrs, ctrl, func(c *certificatesv1.CertificateSigningRequest) []string {
		if len(c.Status.Certificate) > 0 || hasCondition(c, certificatesv1.CertificateApproved) || hasCondition(c, certificatesv1.CertificateDenied) {
			return nil
		}
		return []string{consumer.KeyOf(c)}
	})
	return a, nil
}

var _ consumer.Reconciler = (*Approver)(nil)

// Reconcile approves the request req.Key if a recognizer knows it and its
// requestor passes the recognizer's access review (kube's handle).
func (a *Approver) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	_, name := req.NamespaceName()
	csr, ok := a.csrs.Get("", name)
	if !ok || len(csr.Status.Certificate) > 0 || hasCondition(csr, certificatesv1.CertificateApproved) ||
		hasCondition(csr, certificatesv1.CertificateDenied) {
		return consumer.Result{}, nil
	}
	x509cr, err := schemas.ParseCSR(csr.Spec.Request)
	if err != nil {
		return consumer.Result{}, consumer.TerminalError(fmt.Errorf("certificates: csr %s: unable to parse request: %w", name, err))
	}
	var tried []string
	for _, r := range recognizers {
		if !r.recognize(csr, x509cr) {
			continue
		}
		tried = append(tried, r.subresource)
		allowed, err := a.authorize(ctx, csr, r.subresource)
		if err != nil {
			return consumer.Result{}, err
		}
		if !allowed {
			continue
		}
		return consumer.Result{}, a.approve(ctx, csr, r.message)
	}
	if len(tried) > 0 {
		// kube's IgnorableError: a human may still approve it.
		a.log.Info("recognized a CSR but its requestor may not have it approved", "csr", name, "tried", tried, "user", csr.Spec.Username)
	}
	return consumer.Result{}, nil
}

// authorize asks the apiserver whether the requestor may create the
// subresource of certificatesigningrequests (kube's SubjectAccessReview).
func (a *Approver) authorize(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests",
			Subresource: subresource, Verb: "create"},
	}}
	out, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("certificates: subject access review for csr %s: %w", csr.Name, err)
	}
	return out.Status.Allowed, nil
}

func (a *Approver) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, message string) error {
	c := csr.DeepCopy()
	now := metav1.Now()
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: message,
		LastUpdateTime: now, LastTransitionTime: now,
	})
	_, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, c.Name, c, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("certificates: approve csr %s: %w", c.Name, err)
	}
	a.log.Info("approved CSR", "csr", c.Name, "user", c.Spec.Username)
	return nil
}
