package apiserver

import (
	"net/http"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/schemas"
)

// The self reviews: kube-apiserver's create-only resources that tell the
// requesting user who they are (SelfSubjectReview, `kubectl auth whoami`)
// and whether they may do something (SelfSubjectAccessReview, `kubectl auth
// can-i`). They are answered from the request alone and never stored, so
// they are not in the registry: the apiserver routes them itself and
// ReviewResources describes them for discovery.
var (
	selfAccessReviews = &schemas.Resource{
		GroupVersion: authorizationv1.SchemeGroupVersion, Kind: "SelfSubjectAccessReview",
		Plural: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authorizationv1.SelfSubjectAccessReview{} },
	}
	selfReviews = &schemas.Resource{
		GroupVersion: authenticationv1.SchemeGroupVersion, Kind: "SelfSubjectReview",
		Plural: "selfsubjectreviews", Singular: "selfsubjectreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authenticationv1.SelfSubjectReview{} },
	}
)

// ReviewResources are the self reviews the apiserver serves, for discovery.
func ReviewResources() []*schemas.Resource {
	return []*schemas.Resource{selfAccessReviews, selfReviews}
}

// isSelfReview reports whether a group and resource are a self review,
// which every authenticated user may create (kube's system:basic-user).
func isSelfReview(group, resource string) bool {
	return slices.ContainsFunc(ReviewResources(), func(r *schemas.Resource) bool {
		return r.GroupVersion.Group == group && r.Plural == resource
	})
}

func (s *Server) handleReviews() {
	for _, res := range ReviewResources() {
		s.mux.HandleFunc("/apis/"+res.GroupVersion.String()+"/"+res.Plural, func(w http.ResponseWriter, r *http.Request) {
			s.serveReview(w, r, res)
		})
	}
}

func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, res *schemas.Resource) {
	if info, _ := r.Context().Value(infoKey).(requestInfo); info.Verb != "create" || info.Name != "" {
		writeStatus(w, errMethodNotSupported(res.GroupResource(), info.Verb))
		return
	}
	out, err := negotiate(r)
	if err != nil {
		writeStatus(w, errNotAcceptable())
		return
	}
	obj, err := decodeRequestObject(r, res, false)
	if err != nil {
		writeStatus(w, err)
		return
	}
	u := userFrom(r.Context())
	switch review := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		if errs := validateSelfAccessReview(&review.Spec); len(errs) > 0 {
			writeStatus(w, invalid(res, "", errs))
			return
		}
		attrs := Attributes{User: u}
		if ra := review.Spec.ResourceAttributes; ra != nil {
			attrs.Verb, attrs.APIGroup, attrs.Resource, attrs.Subresource = ra.Verb, ra.Group, ra.Resource, ra.Subresource
			attrs.Namespace, attrs.Name = ra.Namespace, ra.Name
		} else {
			attrs.Verb, attrs.Path = review.Spec.NonResourceAttributes.Verb, review.Spec.NonResourceAttributes.Path
		}
		allowed, reason := s.cfg.Authorizer.Authorize(r.Context(), attrs)
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Reason: reason}
	case *authenticationv1.SelfSubjectReview:
		review.Status.UserInfo = authenticationv1.UserInfo{Username: u.User, Groups: u.Groups}
	}
	q := &request{r: r, w: w, res: res, out: out}
	s.respondObject(q, http.StatusCreated, obj)
}

// validateSelfAccessReview is kube's validation of the spec: exactly one of
// resourceAttributes and nonResourceAttributes.
func validateSelfAccessReview(spec *authorizationv1.SelfSubjectAccessReviewSpec) field.ErrorList {
	p := field.NewPath("spec")
	switch {
	case spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil:
		return field.ErrorList{field.Required(p.Child("resourceAttributes"), "one of resourceAttributes or nonResourceAttributes must be specified")}
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		return field.ErrorList{field.Invalid(p.Child("nonResourceAttributes"), spec.NonResourceAttributes, "cannot be specified in combination with resourceAttributes")}
	}
	return nil
}
