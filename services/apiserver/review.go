package apiserver

import (
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/schemas"
)

// The self reviews: kube-apiserver's create-only resources that tell the
// requesting user who they are (SelfSubjectReview, `kubectl auth whoami`),
// whether they may do something (SelfSubjectAccessReview, `kubectl auth
// can-i`) and everything they may do (SelfSubjectRulesReview, `kubectl auth
// can-i --list`; complete only with a RuleLister authorizer). They are
// answered from the request alone and never stored, so they are not in the
// registry: the apiserver routes them itself and ReviewResources describes
// them for discovery.
var (
	selfAccessReviews = &schemas.Resource{
		GroupVersion: authorizationv1.SchemeGroupVersion, Kind: "SelfSubjectAccessReview",
		Plural: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authorizationv1.SelfSubjectAccessReview{} },
	}
	selfRulesReviews = &schemas.Resource{
		GroupVersion: authorizationv1.SchemeGroupVersion, Kind: "SelfSubjectRulesReview",
		Plural: "selfsubjectrulesreviews", Singular: "selfsubjectrulesreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authorizationv1.SelfSubjectRulesReview{} },
	}
	selfReviews = &schemas.Resource{
		GroupVersion: authenticationv1.SchemeGroupVersion, Kind: "SelfSubjectReview",
		Plural: "selfsubjectreviews", Singular: "selfsubjectreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authenticationv1.SelfSubjectReview{} },
	}
)

// ReviewResources are the self reviews the apiserver serves, for discovery.
func ReviewResources() []*schemas.Resource {
	return []*schemas.Resource{selfAccessReviews, selfRulesReviews, selfReviews}
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
	case *authorizationv1.SelfSubjectRulesReview:
		review.Status = s.rulesOf(u)
	case *authenticationv1.SelfSubjectReview:
		review.Status.UserInfo = authenticationv1.UserInfo{Username: u.User, Groups: u.Groups}
	}
	q := &request{r: r, w: w, res: res, out: out}
	s.respondObject(q, http.StatusCreated, obj)
}

// rulesOf is what u may do, if the authorizer can list it.
func (s *Server) rulesOf(u User) authorizationv1.SubjectRulesReviewStatus {
	lister, ok := s.cfg.Authorizer.(RuleLister)
	if !ok {
		return authorizationv1.SubjectRulesReviewStatus{Incomplete: true, EvaluationError: "the authorizer does not list its rules"}
	}
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, r := range lister.RulesFor(u) {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources})
	}
	return st
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
