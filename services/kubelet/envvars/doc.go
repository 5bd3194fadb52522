// Package envvars builds the Service environment variables the kubelet
// gives every container, as kube's pkg/kubelet/envvars and the kubelet's
// getServiceEnvVarMap do: for each Service with a cluster IP, NAME_SERVICE_HOST,
// NAME_SERVICE_PORT (the first port), NAME_SERVICE_PORT_<PORTNAME> for
// named ports, and the docker-link variables NAME_PORT,
// NAME_PORT_<port>_<PROTO>, ..._PROTO, ..._PORT and ..._ADDR. NAME is the
// Service's name upper-cased with '-' as '_'.
//
// [ForPod] chooses the Services as the kubelet does: the master Service
// default/kubernetes always, and the Services of the pod's own namespace
// when enableServiceLinks is true (the default).
package envvars
