package controlplane

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/services/apiserver/bootstraptoken"
)

// What the servers tell nodes that join (cairn kubelet --join):
//
//	GET /cacerts            the cluster CA certificate (PEM), to anyone, as
//	                        k3s serves it: a joiner checks it against the
//	                        CA hash of its join token before trusting the
//	                        server (kubeadm's discovery does the same with
//	                        kube-public/cluster-info)
//	GET /cairn/v1/endpoints the NATS client URLs of the log (JSON
//	                        {"nats": [...]}), to nodes (system:node): the
//	                        apiservers themselves are the endpoints of the
//	                        default/kubernetes Service
const (
	CACertsPath   = "/cacerts"
	EndpointsPath = "/cairn/v1/endpoints"
)

// JoinEndpoints is the document at EndpointsPath.
type JoinEndpoints struct {
	NATS []string `json:"nats"`
}

func (cp *ControlPlane) joinHandlers(cfg Config, extra map[string]http.Handler) {
	if len(cfg.ClusterCA) > 0 {
		ca := slices.Clone(cfg.ClusterCA)
		extra[CACertsPath] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-pem-file")
			w.Write(ca)
		})
	}
	extra[EndpointsPath] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(JoinEndpoints{NATS: cp.natsURLs(cfg)})
	})
}

// natsURLs are the client URLs of this server's NATS and of the other
// servers of its NATS cluster (as the server announces them to clients).
func (cp *ControlPlane) natsURLs(cfg Config) []string {
	var urls []string
	if cp.embNATS != nil {
		urls = append(urls, cp.embNATS.URL())
	} else {
		for _, u := range strings.Split(cfg.NATSURL, ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
	}
	for _, u := range cp.NATS.DiscoveredServers() {
		if !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	return urls
}

func (cp *ControlPlane) bootstrapTokens(cfg Config) *bootstraptoken.Authenticator {
	return &bootstraptoken.Authenticator{Store: cp.Store, Log: cfg.Log.With("component", "bootstrap-token-authenticator")}
}
