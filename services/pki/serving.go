package pki

import (
	"errors"
	"fmt"
)

// IssueServing issues a serving certificate for hosts (DNS names and IP
// addresses), signed by the cluster CA and valid for one year, with cn as
// its common name. Nothing is written to disk. It is what an in-cluster
// HTTPS server whose clients trust the cluster CA serves, e.g. an
// admission webhook behind the Service <name>.<namespace> with host
// <name>.<namespace>.svc, the name the apiserver checks.
func (p *PKI) IssueServing(cn string, hosts []string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("pki: issue serving: no hosts")
	}
	tmpl := servingTemplate(hosts)
	tmpl.Subject.CommonName = cn
	cert, key, err := p.issue(tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue serving: %w", err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return encodeCert(cert), keyPEM, nil
}
