package apiserver

import (
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/schemas"
)

// The reviews: kube-apiserver's create-only resources that tell the
// requesting user who they are (SelfSubjectReview, `kubectl auth whoami`),
// who the bearer of a token is (TokenReview, answered by the
// authenticators),
// whether they may do something (SelfSubjectAccessReview, `kubectl auth
// can-i`), everything they may do (SelfSubjectRulesReview, `kubectl auth
// can-i --list`; complete only with a RuleLister authorizer), and whether
// someone else may (SubjectAccessReview, and LocalSubjectAccessReview in
// one namespace). They are answered by the authorizer and never stored, so
// they are not in the registry: the apiserver routes them itself and
// ReviewResources describes them for discovery.
var (
	accessReviews = &schemas.Resource{
		GroupVersion: authorizationv1.SchemeGroupVersion, Kind: "SubjectAccessReview",
		Plural: "subjectaccessreviews", Singular: "subjectaccessreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authorizationv1.SubjectAccessReview{} },
	}
	localAccessReviews = &schemas.Resource{
		GroupVersion: authorizationv1.SchemeGroupVersion, Kind: "LocalSubjectAccessReview",
		Plural: "localsubjectaccessreviews", Singular: "localsubjectaccessreview", Verbs: []string{"create"},
		Namespaced: true,
		New:        func() schemas.Object { return &authorizationv1.LocalSubjectAccessReview{} },
	}
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
	tokenReviews = &schemas.Resource{
		GroupVersion: authenticationv1.SchemeGroupVersion, Kind: "TokenReview",
		Plural: "tokenreviews", Singular: "tokenreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authenticationv1.TokenReview{} },
	}
	selfReviews = &schemas.Resource{
		GroupVersion: authenticationv1.SchemeGroupVersion, Kind: "SelfSubjectReview",
		Plural: "selfsubjectreviews", Singular: "selfsubjectreview", Verbs: []string{"create"},
		New: func() schemas.Object { return &authenticationv1.SelfSubjectReview{} },
	}
)

// ReviewResources are the self reviews the apiserver serves, for discovery.
func ReviewResources() []*schemas.Resource {
	return []*schemas.Resource{localAccessReviews, selfAccessReviews, selfRulesReviews, accessReviews, selfReviews, tokenReviews}
}

func (s *Server) handleReviews() {
	for _, res := range ReviewResources() {
		h := func(w http.ResponseWriter, r *http.Request) { s.serveReview(w, r, res) }
		if res.Namespaced {
			s.mux.HandleFunc("/apis/"+res.GroupVersion.String()+"/namespaces/{namespace}/"+res.Plural, h)
			continue
		}
		s.mux.HandleFunc("/apis/"+res.GroupVersion.String()+"/"+res.Plural, h)
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
	if err := s.answerReview(r, obj); err != nil {
		writeStatus(w, err)
		return
	}
	q := &request{r: r, w: w, res: res, out: out}
	s.respondObject(q, http.StatusCreated, obj)
}

// answerReview fills the status of a review from the authorizer, or
// returns the validation error of its spec.
func (s *Server) answerReview(r *http.Request, obj schemas.Object) error {
	u := userFrom(r.Context())
	switch review := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		if errs := validateAccessAttributes(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes); len(errs) > 0 {
			return invalid(selfAccessReviews, "", errs)
		}
		review.Status = s.decide(r, u, review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
	case *authorizationv1.SubjectAccessReview:
		if errs := validateSubjectAccessReview(&review.Spec); len(errs) > 0 {
			return invalid(accessReviews, "", errs)
		}
		review.Status = s.decide(r, subjectOf(&review.Spec), review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
	case *authorizationv1.LocalSubjectAccessReview:
		ns := r.PathValue("namespace")
		if review.Namespace == "" {
			review.Namespace = ns
		}
		if review.Namespace != ns {
			return errBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		errs := validateSubjectAccessReview(&review.Spec)
		if ra := review.Spec.ResourceAttributes; ra != nil && ra.Namespace != review.Namespace {
			errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), ra.Namespace, "must match metadata.namespace"))
		}
		if review.Spec.NonResourceAttributes != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), review.Spec.NonResourceAttributes, "disallowed on this kind of request"))
		}
		if len(errs) > 0 {
			return invalid(localAccessReviews, "", errs)
		}
		review.Status = s.decide(r, subjectOf(&review.Spec), review.Spec.ResourceAttributes, nil)
	case *authorizationv1.SelfSubjectRulesReview:
		review.Status = s.rulesOf(u, review.Spec.Namespace)
	case *authenticationv1.SelfSubjectReview:
		review.Status.UserInfo = authUserInfo(u)
	case *authenticationv1.TokenReview:
		if review.Spec.Token == "" {
			return errBadRequest("token is required for TokenReview in authentication")
		}
		st, err := s.reviewToken(r.Context(), review.Spec)
		if err != nil {
			return err
		}
		review.Spec, review.Status = authenticationv1.TokenReviewSpec{}, st
	}
	return nil
}

// authUserInfo is u as authentication/v1 spells it.
func authUserInfo(u User) authenticationv1.UserInfo {
	ui := authenticationv1.UserInfo{Username: u.User, UID: u.UID, Groups: u.Groups}
	for k, v := range u.Extra {
		if ui.Extra == nil {
			ui.Extra = map[string]authenticationv1.ExtraValue{}
		}
		ui.Extra[k] = v
	}
	return ui
}

// subjectOf is the user a SubjectAccessReview asks about.
func subjectOf(spec *authorizationv1.SubjectAccessReviewSpec) User {
	u := User{User: spec.User, UID: spec.UID, Groups: spec.Groups}
	for k, v := range spec.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = v
	}
	return u
}

// decide asks the authorizer about u doing what the attributes say.
func (s *Server) decide(r *http.Request, u User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	attrs := Attributes{User: u}
	if ra != nil {
		attrs.Verb, attrs.APIGroup, attrs.Resource, attrs.Subresource = ra.Verb, ra.Group, ra.Resource, ra.Subresource
		attrs.Namespace, attrs.Name = ra.Namespace, ra.Name
	} else {
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	}
	allowed, reason := s.cfg.Authorizer.Authorize(r.Context(), attrs)
	return authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Reason: reason}
}

// rulesOf is what u may do in namespace, if the authorizer can list it.
func (s *Server) rulesOf(u User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	lister, ok := s.cfg.Authorizer.(RuleLister)
	if !ok {
		return authorizationv1.SubjectRulesReviewStatus{Incomplete: true, EvaluationError: "the authorizer does not list its rules"}
	}
	return lister.RulesFor(u, namespace)
}

// validateSubjectAccessReview is kube's ValidateSubjectAccessReviewSpec.
func validateSubjectAccessReview(spec *authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	errs := validateAccessAttributes(spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

// validateAccessAttributes is kube's validation of an access review's
// spec: exactly one of resourceAttributes and nonResourceAttributes.
func validateAccessAttributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) field.ErrorList {
	p := field.NewPath("spec")
	switch {
	case ra == nil && nra == nil:
		return field.ErrorList{field.Required(p.Child("resourceAttributes"), "one of resourceAttributes or nonResourceAttributes must be specified")}
	case ra != nil && nra != nil:
		return field.ErrorList{field.Invalid(p.Child("nonResourceAttributes"), nra, "cannot be specified in combination with resourceAttributes")}
	}
	return nil
}
