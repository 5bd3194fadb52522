package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// Token lifetimes of the TokenRequest API, as kube's.
const (
	// DefaultTokenExpirationSeconds is spec.expirationSeconds when unset.
	DefaultTokenExpirationSeconds int64 = 60 * 60
	// MinTokenExpirationSeconds and MaxTokenExpirationSeconds bound it
	// (kube's ValidateTokenRequest).
	MinTokenExpirationSeconds int64 = 10 * 60
	MaxTokenExpirationSeconds int64 = 1 << 32
	// WarnOnlyBoundTokenExpirationSeconds is the lifetime the
	// ServiceAccount admission plugin asks for in a pod's token volume: a
	// pod-bound token with exactly this lifetime and the apiserver's
	// audiences is issued for ExtensionTokenExpirationSeconds instead and
	// only warned about after it (kube's --service-account-extend-token-expiration,
	// on by default), so that clients that do not reload the file keep
	// working while they are fixed.
	WarnOnlyBoundTokenExpirationSeconds int64 = 60*60 + 7
	ExtensionTokenExpirationSeconds     int64 = 24 * 365 * 60 * 60
)

// TokenBinding is what a service-account token is issued for: the
// ServiceAccount, and the object it is bound to (a Pod, with the Node it
// runs on if any, or a Secret), as read at issue time.
type TokenBinding = satoken.Binding

// TokenIssuer signs the tokens of the serviceaccounts/token subresource
// (kube's serviceaccount.TokenGenerator). Safe for concurrent use.
type TokenIssuer interface {
	// Audiences are the apiserver's own audiences (kube-apiserver's
	// --api-audiences), which tokens get when the request names none.
	Audiences() []string
	// IssueToken signs a token valid from now for expirationSeconds; a
	// non-zero warnAfter (seconds) is when its user should be warned.
	IssueToken(b TokenBinding, now time.Time, expirationSeconds, warnAfter int64, audiences []string) (string, error)
}

var tokenRequestKind = schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}

// requestToken serves POST serviceaccounts/NAME/token as kube's
// TokenREST.Create does: it reads the ServiceAccount and the bound object
// (refusing a pod of another ServiceAccount, an unknown kind, or a UID
// that does not match), caps the lifetime at Config.MaxTokenExpiration,
// extends the ServiceAccount admission plugin's pod tokens, signs, and
// answers 201 with the TokenRequest, status.token set. Nothing is stored.
func (s *Server) requestToken(q *request) {
	if s.cfg.Tokens == nil {
		writeStatus(q.w, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name))
		return
	}
	body, err := readBody(q.r)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	var req authenticationv1.TokenRequest
	if err := decodeInto(body, &req, strictFields(q)); err != nil {
		writeStatus(q.w, err)
		return
	}
	out, err := s.issueTokenRequest(q, &req)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	writeJSON(q.w, http.StatusCreated, out)
}

func (s *Server) issueTokenRequest(q *request, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	saObj, _, err := s.load(q.ctx(), q.res, q.key(), q.info.Name)
	if err != nil {
		return nil, err
	}
	b := TokenBinding{ServiceAccount: saObj.(*corev1.ServiceAccount)}
	if req.Spec.ExpirationSeconds == nil {
		exp := DefaultTokenExpirationSeconds
		req.Spec.ExpirationSeconds = &exp
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = s.cfg.Tokens.Audiences()
	}
	if req.Name == "" {
		req.Name = b.ServiceAccount.Name
	}
	if req.Namespace == "" {
		req.Namespace = b.ServiceAccount.Namespace
	}
	// Taken before signing, so status.expirationTimestamp is never after
	// the token's exp.
	now := s.now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind, "", errs)
	}
	// Admission sees the TokenRequest (kube's NodeRestriction checks a
	// node's tokens are bound to its own pods).
	if err := s.admit(q.ctx(), &AdmissionRequest{Resource: q.res, Subresource: "token", Operation: "CREATE",
		Namespace: q.info.Namespace, Name: q.info.Name, Object: req, User: userFrom(q.ctx())}); err != nil {
		return nil, err
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if err := s.loadBoundObject(q, ref, &b); err != nil {
			return nil, err
		}
	}
	if max := s.cfg.MaxTokenExpiration; max > 0 && *req.Spec.ExpirationSeconds > int64(max.Seconds()) {
		q.w.Header().Add("Warning", fmt.Sprintf(`299 - "requested expiration of %d seconds shortened to %d seconds"`, *req.Spec.ExpirationSeconds, int64(max.Seconds())))
		*req.Spec.ExpirationSeconds = int64(max.Seconds())
	}
	exp, warnAfter := *req.Spec.ExpirationSeconds, int64(0)
	if b.Pod != nil && exp == WarnOnlyBoundTokenExpirationSeconds && !s.cfg.NoTokenExtension && s.apiAudiences(req.Spec.Audiences) {
		warnAfter, exp = exp, ExtensionTokenExpirationSeconds
	}
	tok, err := s.cfg.Tokens.IssueToken(b, now, exp, warnAfter, req.Spec.Audiences)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err))
	}
	out := req.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{Kind: "TokenRequest", APIVersion: authenticationv1.SchemeGroupVersion.String()}
	out.Status = authenticationv1.TokenRequestStatus{Token: tok,
		ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*out.Spec.ExpirationSeconds) * time.Second))}
	return out, nil
}

// loadBoundObject reads the Pod (and its Node) or Secret a TokenRequest
// binds to, as kube's TokenREST.
func (s *Server) loadBoundObject(q *request, ref *authenticationv1.BoundObjectReference, b *TokenBinding) error {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var uid types.UID
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		obj, err := s.loadCore(q, "pods", q.info.Namespace, ref.Name)
		if err != nil {
			return err
		}
		b.Pod = obj.(*corev1.Pod)
		if q.info.Name != b.Pod.Spec.ServiceAccountName {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", q.info.Name))
		}
		uid = b.Pod.UID
		if n := b.Pod.Spec.NodeName; n != "" {
			// A node that is gone only leaves the node out of the token.
			if obj, err := s.loadCore(q, "nodes", "", n); err == nil {
				b.Node = obj.(*corev1.Node)
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
	case gvk.Group == "" && gvk.Kind == "Secret":
		obj, err := s.loadCore(q, "secrets", q.info.Namespace, ref.Name)
		if err != nil {
			return err
		}
		b.Secret = obj.(*corev1.Secret)
		uid = b.Secret.UID
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("object reference of unknown type: %v", gvk))
	}
	if ref.UID != "" && uid != ref.UID {
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}

// loadCore reads one core/v1 object.
func (s *Server) loadCore(q *request, plural, namespace, name string) (schemas.Object, error) {
	res, ok := s.reg.Lookup("", "v1", plural)
	if !ok {
		return nil, fmt.Errorf("apiserver: %s not served", plural)
	}
	obj, _, err := s.load(q.ctx(), res, storage.Key("", plural, namespace, name), name)
	return obj, err
}

// apiAudiences reports whether every audience is one of the apiserver's.
func (s *Server) apiAudiences(auds []string) bool {
	own := s.cfg.Tokens.Audiences()
	for _, a := range auds {
		if !slices.Contains(own, a) {
			return false
		}
	}
	return true
}

// validateTokenRequest is kube's ValidateTokenRequest.
func validateTokenRequest(tr *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	exp := *tr.Spec.ExpirationSeconds
	if exp < MinTokenExpirationSeconds {
		errs = append(errs, field.Invalid(p, exp, "may not specify a duration less than 10 minutes"))
	}
	if exp > MaxTokenExpirationSeconds {
		errs = append(errs, field.Invalid(p, exp, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}
