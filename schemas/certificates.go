package schemas

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// certificates.k8s.io/v1: CertificateSigningRequests, with kube's strategy
// (pkg/registry/certificates/certificates: the requestor comes from the
// request, spec is immutable, status and approval are subresources that
// each change only their part), validation
// (pkg/apis/certificates/validation) and printer columns (NAME AGE
// SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION). Approving and signing
// are the controllers' business (services/controllers/certificates).

var gvCertificates = certificatesv1.SchemeGroupVersion

func csrResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCertificates, Kind: "CertificateSigningRequest", Plural: "certificatesigningrequests",
		Singular: "certificatesigningrequest", ShortNames: []string{"csr"},
		Subresources:     []string{"approval", "status"},
		New:              func() Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList:          func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		Default:          defaulter(defaultCSR),
		PrepareForCreate: defaulter(prepareCSRCreate),
		SetRequestor: func(obj Object, user string, groups []string) {
			csr := obj.(*certificatesv1.CertificateSigningRequest)
			csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = user, "", groups, nil
		},
		PrepareForUpdate:       preparer(prepareCSRUpdate),
		PrepareForStatusUpdate: preparer(prepareCSRStatusUpdate),
		SubresourceUpdates: map[string]SubresourceUpdate{"approval": {
			Prepare:  preparer(prepareCSRApprovalUpdate),
			Validate: updateValidator(false, validateCSRUpdate),
		}},
		ValidateCreate: createValidator(false, validateCSR),
		ValidateUpdate: updateValidator(false, validateCSRUpdate),
		Fields: fieldser(false, func(c *certificatesv1.CertificateSigningRequest) fields.Set {
			return fields.Set{"spec.signerName": c.Spec.SignerName}
		}),
		Table: csrTable(now),
	}
}

// SubresourceUpdate is the strategy of an update through a subresource
// other than status (a CSR's approval): what it keeps from the stored
// object, and its validation.
type SubresourceUpdate struct {
	Prepare  func(obj, old Object)
	Validate func(obj, old Object) field.ErrorList
}

// defaultCSR is SetDefaults_CertificateSigningRequestCondition: a condition
// without a status is True.
func defaultCSR(c *certificatesv1.CertificateSigningRequest) {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Status == "" {
			c.Status.Conditions[i].Status = corev1.ConditionTrue
		}
	}
}

// prepareCSRCreate: users cannot create pre-approved requests, nor name
// the requestor (SetRequestor does, from the request's user).
func prepareCSRCreate(c *certificatesv1.CertificateSigningRequest) {
	c.Spec.Username, c.Spec.UID, c.Spec.Groups, c.Spec.Extra = "", "", nil, nil
	c.Status = certificatesv1.CertificateSigningRequestStatus{}
}

// prepareCSRUpdate: only metadata changes through the main resource.
func prepareCSRUpdate(c, old *certificatesv1.CertificateSigningRequest) {
	c.Spec, c.Status = old.Spec, old.Status
	keepGeneration(c, old)
}

// prepareCSRStatusUpdate: the status subresource sets the certificate and
// the signer's conditions, never spec nor the approval conditions.
func prepareCSRStatusUpdate(c, old *certificatesv1.CertificateSigningRequest) {
	c.Spec = old.Spec
	c.Status.Conditions = keepConditions(c.Status.Conditions, old.Status.Conditions, approvalConditionTypes)
	populateCSRConditionTimes(c, old, metav1.Now())
	keepGeneration(c, old)
}

// prepareCSRApprovalUpdate: the approval subresource changes only the
// conditions (validation keeps the terminal ones).
func prepareCSRApprovalUpdate(c, old *certificatesv1.CertificateSigningRequest) {
	c.Spec, c.Status.Certificate = old.Spec, old.Status.Certificate
	populateCSRConditionTimes(c, old, metav1.Now())
	keepGeneration(c, old)
}

// populateCSRConditionTimes is kube's populateConditionTimestamps: a
// condition without times gets now, and keeps its transition time while
// its status does not change.
func populateCSRConditionTimes(c, old *certificatesv1.CertificateSigningRequest, now metav1.Time) {
	for i := range c.Status.Conditions {
		cond := &c.Status.Conditions[i]
		if cond.LastUpdateTime.IsZero() {
			cond.LastUpdateTime = now
		}
		if !cond.LastTransitionTime.IsZero() {
			continue
		}
		cond.LastTransitionTime = now
		if old == nil {
			continue
		}
		for _, o := range old.Status.Conditions {
			if o.Type == cond.Type && o.Status == cond.Status && !o.LastTransitionTime.IsZero() {
				cond.LastTransitionTime = o.LastTransitionTime
			}
		}
	}
}

var approvalConditionTypes = sets.New(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied)

// keepConditions is base with the conditions of the given types taken
// from from instead, as kube's status and approval strategies merge them.
func keepConditions(base, from []certificatesv1.CertificateSigningRequestCondition, types sets.Set[certificatesv1.RequestConditionType]) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range base {
		if !types.Has(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range from {
		if types.Has(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

var csrUsages = sets.New(
	certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
	certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
	certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly, certificatesv1.UsageDecipherOnly,
	certificatesv1.UsageAny, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning,
	certificatesv1.UsageEmailProtection, certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem,
	certificatesv1.UsageIPsecTunnel, certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping,
	certificatesv1.UsageOCSPSigning, certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC,
)

// ParseCSR decodes the PEM PKCS#10 request of a CSR (kube's
// certificates.ParseCSR).
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// validateCSR is ValidateCertificateSigningRequestCreate.
func validateCSR(c *certificatesv1.CertificateSigningRequest) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if req, err := ParseCSR(c.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), c.Spec.Request, err.Error()))
	} else if err := req.CheckSignature(); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), c.Spec.Request, err.Error()))
	}
	if len(c.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), "usages must be provided"))
	}
	seen := sets.New[certificatesv1.KeyUsage]()
	for i, u := range c.Spec.Usages {
		p := spec.Child("usages").Index(i)
		switch {
		case !csrUsages.Has(u):
			errs = append(errs, field.NotSupported(p, u, sets.List(csrUsages)))
		case seen.Has(u):
			errs = append(errs, field.Duplicate(p, u))
		}
		seen.Insert(u)
	}
	errs = append(errs, validateSignerName(spec.Child("signerName"), c.Spec.SignerName)...)
	if e := c.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	return append(errs, validateCSRStatus(c)...)
}

// validateSignerName is ValidateSignerName: <fully qualified domain>/<path>.
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, rest, ok := strings.Cut(name, "/")
	if !ok || rest == "" {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(domain) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if !strings.Contains(domain, ".") {
		errs = append(errs, field.Invalid(p, name, "should be a domain with at least two segments separated by dots"))
	}
	if len(rest) > 253 {
		errs = append(errs, field.TooLong(p, rest, 253))
	}
	return errs
}

// validateCSRStatus checks the conditions and the certificate.
func validateCSRStatus(c *certificatesv1.CertificateSigningRequest) field.ErrorList {
	conds := field.NewPath("status", "conditions")
	var errs field.ErrorList
	seen := sets.New[certificatesv1.RequestConditionType]()
	for i, cond := range c.Status.Conditions {
		p := conds.Index(i)
		switch cond.Type {
		case "":
			errs = append(errs, field.Required(p.Child("type"), ""))
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if seen.Has(cond.Type) {
				errs = append(errs, field.Duplicate(p.Child("type"), cond.Type))
			}
			if cond.Status != corev1.ConditionTrue {
				errs = append(errs, field.NotSupported(p.Child("status"), cond.Status, []string{string(corev1.ConditionTrue)}))
			}
		default:
			if s := cond.Status; s != corev1.ConditionTrue && s != corev1.ConditionFalse && s != corev1.ConditionUnknown {
				errs = append(errs, field.NotSupported(p.Child("status"), s, []string{"True", "False", "Unknown"}))
			}
		}
		seen.Insert(cond.Type)
	}
	if seen.Has(certificatesv1.CertificateApproved) && seen.Has(certificatesv1.CertificateDenied) {
		errs = append(errs, field.Invalid(conds, c.Status.Conditions, "Approved and Denied conditions are mutually exclusive"))
	}
	if len(c.Status.Certificate) > 0 {
		if err := validateCertificatePEM(c.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	return errs
}

func validateCertificatePEM(b []byte) error {
	n := 0
	for rest := b; len(strings.TrimSpace(string(rest))) > 0; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return errors.New("must contain at least one CERTIFICATE PEM block and nothing else")
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) > 0 {
			return errors.New("no PEM block headers are permitted")
		}
		if _, err := x509.ParseCertificates(block.Bytes); err != nil {
			return err
		}
	}
	if n == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// validateCSRUpdate is ValidateCertificateSigningRequest{,Status,Approval}Update:
// the spec never changes; conditions of the terminal types (Approved,
// Denied, Failed) are never removed; an issued certificate never changes.
func validateCSRUpdate(c, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	errs := validateCSRStatus(c)
	if !apiequality.Semantic.DeepEqual(c.Spec, old.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), "<spec>", "field is immutable"))
	}
	conds := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if hasCSRCondition(old, t) && !hasCSRCondition(c, t) {
			errs = append(errs, field.Forbidden(conds, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if len(old.Status.Certificate) > 0 && string(old.Status.Certificate) != string(c.Status.Certificate) {
		errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
	}
	return errs
}

func hasCSRCondition(c *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t {
			return true
		}
	}
	return false
}

// csrTable is printCertificateSigningRequest.
func csrTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		ageColumn,
		{Name: "SignerName", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"]},
		{Name: "Requestor", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["username"]},
		{Name: "RequestedDuration", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"]},
		{Name: "Condition", Type: "string", Description: certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
	}
	return tableOf(cols, func(c *certificatesv1.CertificateSigningRequest) []any {
		signer, requested := "<none>", "<none>"
		if c.Spec.SignerName != "" {
			signer = c.Spec.SignerName
		}
		if e := c.Spec.ExpirationSeconds; e != nil {
			requested = duration.HumanDuration(time.Duration(*e) * time.Second)
		}
		return []any{c.Name, since(now, c.CreationTimestamp), signer, c.Spec.Username, requested, CSRCondition(c)}
	})
}

// CSRCondition is the CONDITION column: Pending, Approved or Denied, then
// ",Failed" and ",Issued" as they apply (kube's extractCSRStatus).
func CSRCondition(c *certificatesv1.CertificateSigningRequest) string {
	var s string
	switch {
	case hasCSRCondition(c, certificatesv1.CertificateDenied):
		s = "Denied"
	case hasCSRCondition(c, certificatesv1.CertificateApproved):
		s = "Approved"
	default:
		s = "Pending"
	}
	if hasCSRCondition(c, certificatesv1.CertificateFailed) {
		s += ",Failed"
	}
	if len(c.Status.Certificate) > 0 {
		s += ",Issued"
	}
	return s
}
