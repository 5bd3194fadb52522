package apiserver

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	apistorage "k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

// API Priority and Fairness is k8s.io/apiserver's WithPriorityAndFairness
// filter, where kube-apiserver's handler chain has it: after
// authentication and impersonation, before authorization. It classifies
// each request by the FlowSchemas into a priority level, queues it there
// fairly among flows, and answers 429 with Retry-After when its queue is
// full or its wait runs out. Long-running requests (proxy, exec, attach,
// port-forward, log) bypass it; a watch holds its seat only until its
// initial events are sent (watch.go calls WatchInitialized).

var longRunning = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"),
	sets.NewString("attach", "exec", "proxy", "log", "portforward"))

// flowControlled wraps next (authorization and routing) in the APF filter
// of cfg.FlowControl; without one it is next.
func (s *Server) flowControlled(next http.Handler) http.Handler {
	fc := s.cfg.FlowControl
	if fc == nil {
		return next
	}
	// No object counts are tracked: a list costs the minimum seats, as
	// kube charges a resource whose count it does not know.
	noCount := func(string) (apistorage.Stats, error) { return apistorage.Stats{}, fcrequest.ObjectCountNotFoundErr }
	est := fcrequest.NewWorkEstimator(noCount, fc.GetInterestedWatchCount, fcrequest.DefaultWorkEstimatorConfig(), fc.GetMaxSeats)
	// A request waits in its queue at most a quarter of the request
	// timeout, as kube-apiserver (--request-timeout / 4).
	apf := genericfilters.WithPriorityAndFairness(next, longRunning, fc, est, s.cfg.RequestTimeout/4)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := r.Context().Value(infoKey).(requestInfo)
		u, _ := r.Context().Value(userKey).(User)
		ctx := apirequest.WithRequestInfo(r.Context(), kubeRequestInfo(info))
		ctx = apirequest.WithUser(ctx, &user.DefaultInfo{Name: u.User, Groups: u.Groups})
		apf.ServeHTTP(w, r.WithContext(ctx))
	})
}

// kubeRequestInfo is info as k8s.io/apiserver's RequestInfo.
func kubeRequestInfo(info requestInfo) *apirequest.RequestInfo {
	ri := &apirequest.RequestInfo{IsResourceRequest: info.IsResourceRequest, Path: info.Path, Verb: info.Verb,
		APIGroup: info.APIGroup, APIVersion: info.APIVersion, Namespace: info.Namespace, Resource: info.Resource,
		Subresource: info.Subresource, Name: info.Name}
	if info.IsResourceRequest {
		ri.APIPrefix = "apis"
		if info.APIGroup == "" {
			ri.APIPrefix = "api"
		}
		ri.Parts = []string{info.Resource}
		if info.Name != "" {
			ri.Parts = append(ri.Parts, info.Name)
		}
		if info.Subresource != "" {
			ri.Parts = append(ri.Parts, info.Subresource)
		}
	} else {
		ri.Parts = strings.Split(strings.Trim(info.Path, "/"), "/")
	}
	return ri
}

// watchInitialized tells APF that a watch sent its initial events: its
// seat is free for others while it streams.
var watchInitialized = utilflowcontrol.WatchInitialized
