// Package csradmission holds kube's admission plugins for
// CertificateSigningRequests (plugin/pkg/admission/certificates):
//
//   - CertificateApproval: approving or denying through the approval
//     subresource needs the verb "approve" on the signer
//     (certificates.k8s.io signers, named <signerName> or <domain>/*).
//   - CertificateSigning: setting the certificate through the status
//     subresource needs the verb "sign" on the signer.
//   - CertificateSubjectRestriction: no request to the
//     kubernetes.io/kube-apiserver-client signer for the group
//     system:masters.
package csradmission
