package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/pki"
)

// runAPIServer runs the apiserver (with the log publisher and the watch hub)
// against an external etcd and NATS: the scale-out form of `cairn up`.
func runAPIServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		etcd      listFlag
		natsURL   string
		listen    string
		pkiDir    string
		tokenFile string
		insecure  bool
		electTTL  time.Duration
		svcNet    serviceNetFlags
		saFlags   serviceAccountFlags
		identity  string
		timeout   time.Duration
		noProfile bool
	)
	fs := newFlagSet("apiserver", stderr)
	fs.Var(&etcd, "etcd-endpoints", "comma-separated client URLs of etcd (required)")
	fs.StringVar(&natsURL, "nats-url", "", "URL of the NATS server with JetStream (required)")
	fs.StringVar(&listen, "listen", "127.0.0.1:6443", "address to serve on")
	fs.StringVar(&pkiDir, "pki-dir", "", "directory of the cluster PKI (see cairn up); serves HTTPS with client-certificate authentication")
	fs.StringVar(&tokenFile, "token-auth-file", "", "CSV of static bearer tokens: token,user,uid,\"group1,group2\"")
	fs.BoolVar(&insecure, "insecure-http", false, "serve plain HTTP (tests only; needs --token-auth-file)")
	fs.logLevelFlag()
	fs.DurationVar(&electTTL, "election-ttl", publish.DefaultSessionTTL, "etcd session TTL of the publisher election: how long a dead apiserver of another identity keeps the publisher role")
	fs.StringVar(&identity, "identity", "", "name of this apiserver in the publisher election: unique among live apiservers, the same across its restarts (default <hostname>/<listen address>)")
	requestTimeoutFlag(fs.FlagSet, &timeout)
	var backpressure time.Duration
	logBackpressureFlag(fs.FlagSet, &backpressure)
	profilingFlag(fs.FlagSet, &noProfile)
	var apf apfFlags
	apf.register(fs.FlagSet)
	svcNet.register(fs.FlagSet)
	saFlags.register(fs.FlagSet)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if identity == "" {
		h, _ := os.Hostname()
		identity = h + "/" + listen
	}
	if len(etcd) == 0 || natsURL == "" {
		fmt.Fprintln(stderr, "cairn apiserver: --etcd-endpoints and --nats-url are required")
		return errUsage
	}
	if pkiDir == "" && !insecure {
		fmt.Fprintln(stderr, "cairn apiserver: --pki-dir is required (or --insecure-http for tests)")
		return errUsage
	}
	log, err := fs.logger(stderr)
	if err != nil {
		return err
	}
	var authn apiserver.Authenticators
	cfg := controlplane.Config{EtcdEndpoints: etcd, NATSURL: natsURL, Listen: listen, Log: log, ElectionTTL: electTTL, Identity: identity,
		OnReady:               func(c, d string) { fmt.Fprintf(stdout, "%s ready (%s)\n", c, d) },
		ServiceClusterIPRange: svcNet.clusterIPRange, ServiceNodePortRange: svcNet.nodePortRange, AdvertiseAddress: svcNet.advertise}
	cfg.ServiceAccountIssuer, cfg.APIAudiences, cfg.MaxTokenExpiration = saFlags.values()
	cfg.RequestTimeout, cfg.DisableProfiling, cfg.LogBackpressure = timeout, noProfile, backpressure
	cfg.PriorityAndFairness = apf.enable
	if cfg.MaxRequestsInFlight, err = apf.limit(); err != nil {
		return err
	}
	if pkiDir != "" {
		p, err := pki.Load(pkiDir, nil)
		if err != nil {
			return err
		}
		cfg.TLS = p.ServerTLSConfig()
		cfg.ClusterCA = p.CAPEM // /cacerts, for nodes that join
		// Kubelets let the apiserver's kubelet client read logs and exec.
		cfg.KubeletClientTLS = p.KubeletClientTLSConfig()
		// The service-account signing key lives with the PKI (sa.key),
		// shared by the apiservers of the cluster.
		cfg.ServiceAccountKeyDir, cfg.ServiceAccountAdmission = pkiDir, true
		authn = append(authn, apiserver.X509Authenticator{})
	}
	if tokenFile != "" {
		toks, err := readTokenFile(tokenFile)
		if err != nil {
			return err
		}
		authn = append(authn, toks)
	}
	cfg.Authenticator = authn
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer cp.Close()
	select {
	case <-ctx.Done():
		return nil
	case err := <-cp.Err():
		return err
	}
}

// readTokenFile reads kube's --token-auth-file format.
func readTokenFile(path string) (apiserver.TokenAuthenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	toks := apiserver.TokenAuthenticator{}
	for i, rec := range recs {
		if len(rec) < 2 || rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("token file %s: line %d: %w", path, i+1, errors.New("want token,user[,uid[,groups]]"))
		}
		u := apiserver.User{User: rec[1]}
		if len(rec) >= 4 && rec[3] != "" {
			u.Groups = strings.Split(rec[3], ",")
		}
		toks[rec[0]] = u
	}
	return toks, nil
}
