package csradmission

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver"
)

const resource = "certificatesigningrequests"

// Plugins are the three plugins, deciding with az.
func Plugins(az apiserver.Authorizer) []apiserver.AdmissionPlugin {
	return []apiserver.AdmissionPlugin{approval{az}, signing{az}, subjectRestriction{}}
}

// authorizedForSigner is kube's IsAuthorizedForSignerName: the verb on
// the signer's name, or on its domain's wildcard.
func authorizedForSigner(ctx context.Context, az apiserver.Authorizer, u apiserver.User, verb, signer string) bool {
	a := apiserver.Attributes{User: u, Verb: verb, APIGroup: certificatesv1.GroupName, Resource: "signers", Name: signer}
	if ok, _ := az.Authorize(ctx, a); ok {
		return true
	}
	domain, _, _ := strings.Cut(signer, "/")
	a.Name = domain + "/*"
	ok, _ := az.Authorize(ctx, a)
	return ok
}

func csrOf(a *apiserver.AdmissionRequest) (*certificatesv1.CertificateSigningRequest, bool) {
	if a.Resource.GroupResource().String() != resource+"."+certificatesv1.GroupName {
		return nil, false
	}
	csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
	return csr, ok
}

type approval struct{ az apiserver.Authorizer }

func (approval) Name() string { return "CertificateApproval" }

func (p approval) Admit(ctx context.Context, a *apiserver.AdmissionRequest) error {
	csr, ok := csrOf(a)
	if !ok || a.Operation != "UPDATE" || a.Subresource != "approval" {
		return nil
	}
	if !authorizedForSigner(ctx, p.az, a.User, "approve", csr.Spec.SignerName) {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("user not permitted to approve requests with signerName %q", csr.Spec.SignerName))
	}
	return nil
}

type signing struct{ az apiserver.Authorizer }

func (signing) Name() string { return "CertificateSigning" }

func (p signing) Admit(ctx context.Context, a *apiserver.AdmissionRequest) error {
	csr, ok := csrOf(a)
	if !ok || a.Operation != "UPDATE" || a.Subresource != "status" {
		return nil
	}
	old, _ := a.OldObject.(*certificatesv1.CertificateSigningRequest)
	if old != nil && bytes.Equal(old.Status.Certificate, csr.Status.Certificate) {
		return nil
	}
	if !authorizedForSigner(ctx, p.az, a.User, "sign", csr.Spec.SignerName) {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("user not permitted to sign requests with signerName %q", csr.Spec.SignerName))
	}
	return nil
}

type subjectRestriction struct{}

func (subjectRestriction) Name() string { return "CertificateSubjectRestriction" }

func (subjectRestriction) Admit(_ context.Context, a *apiserver.AdmissionRequest) error {
	csr, ok := csrOf(a)
	if !ok || a.Operation != "CREATE" || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil
	}
	req, err := schemas.ParseCSR(csr.Spec.Request)
	if err != nil {
		return nil // validation refuses it (422)
	}
	if slices.Contains(req.Subject.Organization, apiserver.GroupMasters) {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("use of %s signer with %s group is not allowed", csr.Spec.SignerName, apiserver.GroupMasters))
	}
	return nil
}
