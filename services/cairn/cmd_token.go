package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// runToken is `cairn token create`: a new join token, as `kubeadm token
// create` makes a bootstrap token (a Secret kube-system/bootstrap-token-<id>)
// and k3s prints it with the CA hash in front (K10<sha256 of the CA>::).
func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprintln(stderr, "usage: cairn token create [--ttl D] [--groups G1,G2] [--description S] [flags]")
		return errUsage
	}
	var (
		ttl         time.Duration
		groups      listFlag
		description string
	)
	fs := newFlagSet("token create", stderr)
	fs.describe("token create [--ttl D] [--groups G1,G2] [--description S] [flags]",
		"Creates a join token for nodes (cairn kubelet --join URL --join-token TOKEN) and prints it.\n\n"+findsCluster)
	fs.clientFlags()
	fs.DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token authenticates (0: forever), as kubeadm's --ttl")
	fs.Var(&groups, "groups", "extra groups of the token's user, each system:bootstrappers:<name> (default "+jointoken.GroupNodes+")")
	fs.StringVar(&description, "description", "made by cairn token create", "the token's description")
	if help, err := fs.parse(args[1:]); help || err != nil {
		return err
	}
	if len(groups) == 0 {
		groups = listFlag{jointoken.GroupNodes}
	}
	for _, g := range groups {
		// kube's bootstrap token validation: extra groups are
		// system:bootstrappers:<[a-z0-9:-]>.
		if !strings.HasPrefix(g, jointoken.GroupBootstrappers+":") {
			return fmt.Errorf("--groups %q: each group must begin with %s:", g, jointoken.GroupBootstrappers)
		}
	}
	if ttl < 0 {
		return errors.New("--ttl: must not be negative")
	}
	rc, err := fs.restConfig()
	if err != nil {
		return err
	}
	ca, err := clusterCA(rc)
	if err != nil {
		return err
	}
	tok, err := jointoken.New(ca)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Secrets(jointoken.Namespace).Create(ctx, tok.BootstrapSecret(description, ttl, groups...), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("token create: %w", oneLine(err))
	}
	fmt.Fprintln(stdout, tok.String())
	return nil
}

// clusterCA is the CA a kubeconfig trusts: the cluster CA of cairn up.
func clusterCA(rc *rest.Config) (*x509.Certificate, error) {
	data := rc.TLSClientConfig.CAData
	if len(data) == 0 && rc.TLSClientConfig.CAFile != "" {
		b, err := os.ReadFile(rc.TLSClientConfig.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig certificate-authority: %w", err)
		}
		data = b
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("the kubeconfig names no cluster CA (certificate-authority-data): a join token carries its hash")
	}
	return x509.ParseCertificate(block.Bytes)
}
