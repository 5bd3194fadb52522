package schemas

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func newService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// allocated is what the apiserver's allocator adds before the write: an
// address and the single-stack IPv4 family fields.
func allocated(svc *corev1.Service, ip string) *corev1.Service {
	single := corev1.IPFamilyPolicySingleStack
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
	svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
	return svc
}

func TestDefaultService(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "services")
	svc := newService("web")
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	res.Default(svc)
	s := svc.Spec
	if s.Type != corev1.ServiceTypeClusterIP || s.SessionAffinity != corev1.ServiceAffinityNone || s.SessionAffinityConfig != nil {
		t.Errorf("type %q affinity %q %v", s.Type, s.SessionAffinity, s.SessionAffinityConfig)
	}
	if s.Ports[0].Protocol != corev1.ProtocolTCP || s.Ports[0].TargetPort != intstr.FromInt32(8080) {
		t.Errorf("port 0 %+v", s.Ports[0])
	}
	if s.Ports[1].Protocol != corev1.ProtocolUDP || s.Ports[1].TargetPort != intstr.FromInt32(53) {
		t.Errorf("target port defaults to the port: %+v", s.Ports[1])
	}
	if s.InternalTrafficPolicy == nil || *s.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster || s.ExternalTrafficPolicy != "" {
		t.Errorf("traffic policies %v %q", s.InternalTrafficPolicy, s.ExternalTrafficPolicy)
	}

	np := newService("np")
	np.Spec.Type = corev1.ServiceTypeNodePort
	np.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	res.Default(np)
	if np.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Errorf("NodePort externalTrafficPolicy %q", np.Spec.ExternalTrafficPolicy)
	}
	if c := np.Spec.SessionAffinityConfig; c == nil || *c.ClientIP.TimeoutSeconds != 10800 {
		t.Errorf("ClientIP affinity config %+v", c)
	}

	lb := newService("lb")
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	res.Default(lb)
	if lb.Spec.AllocateLoadBalancerNodePorts == nil || !*lb.Spec.AllocateLoadBalancerNodePorts {
		t.Errorf("LoadBalancer allocateLoadBalancerNodePorts %v", lb.Spec.AllocateLoadBalancerNodePorts)
	}

	ext := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}
	res.Default(ext)
	if ext.Spec.InternalTrafficPolicy != nil {
		t.Errorf("ExternalName gets no internalTrafficPolicy: %v", *ext.Spec.InternalTrafficPolicy)
	}
}

func TestServiceStrategy(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "services")

	t.Run("create resets status and syncs clusterIPs", func(t *testing.T) {
		svc := newService("web")
		svc.Spec.ClusterIP = "10.96.0.10"
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
		res.Default(svc)
		res.PrepareForCreate(svc)
		if len(svc.Status.LoadBalancer.Ingress) != 0 || !slices.Equal(svc.Spec.ClusterIPs, []string{"10.96.0.10"}) {
			t.Errorf("status %+v clusterIPs %v", svc.Status, svc.Spec.ClusterIPs)
		}
	})

	np := func() *corev1.Service {
		svc := newService("np")
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "https", Port: 443, NodePort: 30443}}
		svc = created(res, svc)
		return allocated(svc, "10.96.0.20")
	}
	t.Run("update keeps allocated values the client left out", func(t *testing.T) {
		old := np()
		old.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
		svc := newService("np")
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports = []corev1.ServicePort{{Name: "https", Port: 443}, {Name: "http", Port: 8080}}
		res.Default(svc)
		res.PrepareForUpdate(svc, old)
		if svc.Spec.ClusterIP != "10.96.0.20" || !slices.Equal(svc.Spec.ClusterIPs, []string{"10.96.0.20"}) {
			t.Errorf("clusterIP %q %v", svc.Spec.ClusterIP, svc.Spec.ClusterIPs)
		}
		if svc.Spec.Ports[0].NodePort != 30443 || svc.Spec.Ports[1].NodePort != 30080 {
			t.Errorf("node ports by name: %+v", svc.Spec.Ports)
		}
		if len(svc.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("a NodePort service has no load-balancer status: %+v", svc.Status)
		}
	})
	t.Run("a node port the other port took is not patched in", func(t *testing.T) {
		old := np()
		svc := old.DeepCopy()
		svc.Spec.Ports[0].NodePort = 0
		svc.Spec.Ports[1].NodePort = 30080
		res.PrepareForUpdate(svc, old)
		if svc.Spec.Ports[0].NodePort != 0 {
			t.Errorf("port 0 gets a new node port, not one still in use: %+v", svc.Spec.Ports)
		}
	})
	t.Run("to ExternalName drops cluster IPs and node ports", func(t *testing.T) {
		old := np()
		svc := old.DeepCopy()
		svc.Spec.Type = corev1.ServiceTypeExternalName
		svc.Spec.ExternalName = "db.example.com"
		res.PrepareForUpdate(svc, old)
		if svc.Spec.ClusterIP != "" || svc.Spec.ClusterIPs != nil || svc.Spec.IPFamilies != nil || svc.Spec.IPFamilyPolicy != nil ||
			svc.Spec.Ports[0].NodePort != 0 || svc.Spec.ExternalTrafficPolicy != "" {
			t.Errorf("spec %+v", svc.Spec)
		}
		if errs := res.ValidateUpdate(svc, old); len(errs) != 0 {
			t.Errorf("to ExternalName is valid: %v", errs)
		}
	})
	t.Run("status update keeps the spec", func(t *testing.T) {
		old := np()
		svc := old.DeepCopy()
		svc.Spec.Ports = nil
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
		res.PrepareForStatusUpdate(svc, old)
		if len(svc.Spec.Ports) != 2 || len(svc.Status.LoadBalancer.Ingress) != 1 {
			t.Errorf("spec %+v status %+v", svc.Spec, svc.Status)
		}
	})
}

func TestValidateService(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "services")
	local := corev1.ServiceInternalTrafficPolicyLocal
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []string
	}{
		{"valid", func(*corev1.Service) {}, nil},
		{"headless without ports", func(s *corev1.Service) { allocated(s, "None"); s.Spec.Ports = nil }, nil},
		{"named target port", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }, nil},
		{"internal traffic Local", func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = &local }, nil},
		{"ExternalName with a selector, as kube allows", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.InternalTrafficPolicy = corev1.ServiceTypeExternalName, "db.example.com.", nil
		}, nil},
		{"name is a DNS-1035 label", func(s *corev1.Service) { s.Name = "1web" },
			[]string{"FieldValueInvalid metadata.name: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"}},
		{"no ports", func(s *corev1.Service) { s.Spec.Ports = nil }, []string{"FieldValueRequired spec.ports: "}},
		{"port 0", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 },
			[]string{"FieldValueInvalid spec.ports[0].port: must be between 1 and 65535, inclusive"}},
		{"port 70000", func(s *corev1.Service) {
			s.Spec.Ports[0].Port = 70000
			s.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
		},
			[]string{"FieldValueInvalid spec.ports[0].port: must be between 1 and 65535, inclusive"}},
		{"protocol", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "HTTP" },
			[]string{`FieldValueNotSupported spec.ports[0].protocol: supported values: "SCTP", "TCP", "UDP"`}},
		{"target port name", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("Not_A_Name") },
			[]string{"FieldValueInvalid spec.ports[0].targetPort: must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"}},
		{"names required with two ports", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 81, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(81)})
		}, []string{"FieldValueRequired spec.ports[0].name: "}},
		{"names unique", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "a", Port: 81, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(81)})
		}, []string{`FieldValueDuplicate spec.ports[1].name: `}},
		{"same port twice", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(81)})
		}, []string{`FieldValueDuplicate spec.ports[1]: `}},
		{"node port on ClusterIP", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			[]string{"FieldValueForbidden spec.ports[0].nodePort: may not be used when `type` is 'ClusterIP'"}},
		{"selector", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "a b"} },
			[]string{"FieldValueInvalid spec.selector: " + badLabelValueMsg}},
		{"session affinity", func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" },
			[]string{`FieldValueNotSupported spec.sessionAffinity: supported values: "ClientIP", "None"`}},
		{"affinity timeout", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			long := int32(86401)
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &long}}
		}, []string{"FieldValueInvalid spec.sessionAffinityConfig.clientIP.timeoutSeconds: must be greater than 0 and less than 86400"}},
		{"bad cluster IP", func(s *corev1.Service) { allocated(s, "10.96.0.300") },
			[]string{"FieldValueInvalid spec.clusterIPs[0]: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"}},
		{"clusterIPs out of step", func(s *corev1.Service) { allocated(s, "10.96.0.3"); s.Spec.ClusterIPs = []string{"10.96.0.4"} },
			[]string{"FieldValueInvalid spec.clusterIPs: first value must match `clusterIP`"}},
		{"headless NodePort", func(s *corev1.Service) { allocated(s, "None"); s.Spec.Type = corev1.ServiceTypeNodePort },
			[]string{"FieldValueInvalid spec.clusterIPs[0]: may not be set to 'None' for NodePort services"}},
		{"ExternalName without a name", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.InternalTrafficPolicy = corev1.ServiceTypeExternalName, nil
		},
			[]string{"FieldValueRequired spec.externalName: "}},
		{"ExternalName not a DNS name", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.InternalTrafficPolicy = corev1.ServiceTypeExternalName, "db_1", nil
		}, []string{"FieldValueInvalid spec.externalName: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"}},
		{"ExternalName with a cluster IP", func(s *corev1.Service) {
			allocated(s, "10.96.0.5")
			s.Spec.Type, s.Spec.ExternalName, s.Spec.InternalTrafficPolicy = corev1.ServiceTypeExternalName, "db.example.com", nil
		}, []string{
			"FieldValueForbidden spec.clusterIPs: may not be set for ExternalName services",
			"FieldValueForbidden spec.ipFamilies: may not be set for ExternalName services",
			"FieldValueForbidden spec.ipFamilyPolicy: may not be set for ExternalName services",
		}},
		{"type", func(s *corev1.Service) { s.Spec.Type = "Magic" },
			[]string{`FieldValueNotSupported spec.type: supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`}},
		{"external traffic policy on ClusterIP", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal },
			[]string{"FieldValueInvalid spec.externalTrafficPolicy: may only be set for externally-accessible services"}},
		{"external IP loopback", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} },
			[]string{"FieldValueInvalid spec.externalIPs[0]: may not be in the loopback range (127.0.0.0/8, ::1/128)"}},
		{"external IP not an IP", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.300"} },
			[]string{"FieldValueInvalid spec.externalIPs[0]: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"}},
		{"external IP unspecified", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"0.0.0.0"} },
			[]string{"FieldValueInvalid spec.externalIPs[0]: may not be unspecified (0.0.0.0)"}},
		{"external IP link-local", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"169.254.1.1"} },
			[]string{"FieldValueInvalid spec.externalIPs[0]: may not be in the link-local range (169.254.0.0/16, fe80::/10)"}},
		{"external IPs make a ClusterIP externally accessible", func(s *corev1.Service) {
			s.Spec.ExternalIPs, s.Spec.ExternalTrafficPolicy = []string{"192.0.2.7"}, corev1.ServiceExternalTrafficPolicyLocal
		}, nil},
		{"external traffic policy unknown", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, "Nearest"
		}, []string{`FieldValueNotSupported spec.externalTrafficPolicy: supported values: "Cluster", "Local"`}},
		{"internal traffic policy unknown", func(s *corev1.Service) {
			p := corev1.ServiceInternalTrafficPolicy("Nearest")
			s.Spec.InternalTrafficPolicy = &p
		}, []string{`FieldValueNotSupported spec.internalTrafficPolicy: supported values: "Cluster", "Local"`}},
		{"health-check node port on NodePort", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal, 30100
		}, []string{"FieldValueInvalid spec.healthCheckNodePort: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"}},
		{"LoadBalancer Local without a health-check node port", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
		}, []string{"FieldValueRequired spec.healthCheckNodePort: "}},
		{"LoadBalancer class", func(s *corev1.Service) {
			c := "example.com/lb"
			s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeLoadBalancer, &c
		}, nil},
		{"LoadBalancer class not a qualified name", func(s *corev1.Service) {
			c := "a/b/c"
			s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeLoadBalancer, &c
		}, []string{"FieldValueInvalid spec.loadBalancerClass: a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"}},
		{"LoadBalancer class on ClusterIP", func(s *corev1.Service) {
			c := "example.com/lb"
			s.Spec.LoadBalancerClass = &c
		}, []string{"FieldValueForbidden spec.loadBalancerClass: may only be used when `type` is 'LoadBalancer'"}},
		{"allocateLoadBalancerNodePorts on NodePort", func(s *corev1.Service) {
			no := false
			s.Spec.Type, s.Spec.AllocateLoadBalancerNodePorts = corev1.ServiceTypeNodePort, &no
		}, []string{"FieldValueForbidden spec.allocateLoadBalancerNodePorts: may only be used when `type` is 'LoadBalancer'"}},
		{"source ranges on ClusterIP", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			[]string{"FieldValueForbidden spec.LoadBalancerSourceRanges: may only be used when `type` is 'LoadBalancer'"}},
		{"source ranges annotation", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Annotations = map[string]string{corev1.AnnotationLoadBalancerSourceRangesKey: "10.0.0.0/8, nope"}
		}, []string{"FieldValueInvalid metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]: must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newService("web"), tt.mutate, tt.want)
		})
	}
}

func TestValidateServiceUpdate(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "services")
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []string
	}{
		{"ports may change", func(s *corev1.Service) { s.Spec.Ports[0].Port = 81 }, nil},
		{"cluster IP may not change", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"} },
			[]string{"FieldValueInvalid spec.clusterIPs[0]: may not change once set"}},
		{"nor become None", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} },
			[]string{"FieldValueInvalid spec.clusterIPs[0]: may not change once set"}},
		{"an unset cluster IP is kept", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil }, nil},
		{"to ExternalName", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := allocated(created(res, newService("web")), "10.96.0.10")
			svc := old.DeepCopy()
			tt.mutate(svc)
			res.Default(svc)
			res.PrepareForUpdate(svc, old)
			wantDetails(t, res.ValidateUpdate(svc, old), tt.want)
		})
	}
}

func TestServiceTable(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "services")
	var cols []string
	for _, c := range res.Table.Columns() {
		cols = append(cols, c.Name)
	}
	if !slices.Equal(cols, []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"}) {
		t.Errorf("columns %v", cols)
	}
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []any
	}{
		{"ClusterIP", func(*corev1.Service) {}, []any{"web", "ClusterIP", "10.96.0.10", "<none>", "80/TCP", "90s", "app=web"}},
		{"NodePort", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}, {Port: 443, Protocol: "TCP"}}
		}, []any{"web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,443/TCP", "90s", "app=web"}},
		{"ExternalName", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}
		}, []any{"web", "ExternalName", "<none>", "db.example.com", "<none>", "90s", "<none>"}},
		{"LoadBalancer pending", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer },
			[]any{"web", "LoadBalancer", "10.96.0.10", "<pending>", "80/TCP", "90s", "app=web"}},
		{"LoadBalancer", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalIPs = []string{"192.0.2.9"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}
		}, []any{"web", "LoadBalancer", "10.96.0.10", "192.0.2.1,lb.example.com,192.0.2.9", "80/TCP", "90s", "app=web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := allocated(newService("web"), "10.96.0.10")
			svc.CreationTimestamp = ago(90 * time.Second)
			svc.Spec.Type, svc.Spec.Ports[0].Protocol = corev1.ServiceTypeClusterIP, corev1.ProtocolTCP
			tt.mutate(svc)
			if row := res.Table.Row(svc); !slices.Equal(row, tt.want) {
				t.Errorf("row %#v\nwant %#v", row, tt.want)
			}
		})
	}
}

// TestValidateServiceStatus: ValidateLoadBalancerStatus's checks of the
// status subresource.
func TestValidateServiceStatus(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "services")
	vip, bad := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPMode("Tunnel")
	tests := []struct {
		name    string
		ingress []corev1.LoadBalancerIngress
		want    []string
	}{
		{"ip and hostname", []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &vip}, {Hostname: "lb.example.com"}}, nil},
		{"not an IP", []corev1.LoadBalancerIngress{{IP: "lb", IPMode: &vip}},
			[]string{"FieldValueInvalid status.loadBalancer.ingress[0].ip: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"}},
		{"hostname an IP", []corev1.LoadBalancerIngress{{Hostname: "192.0.2.1"}},
			[]string{"FieldValueInvalid status.loadBalancer.ingress[0].hostname: must be a DNS name, not an IP address"}},
		{"ipMode without ip", []corev1.LoadBalancerIngress{{Hostname: "lb.example.com", IPMode: &vip}},
			[]string{"FieldValueForbidden status.loadBalancer.ingress[0].ipMode: may not be specified when `ip` is not"}},
		{"ipMode unknown", []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &bad}},
			[]string{`FieldValueNotSupported status.loadBalancer.ingress[0].ipMode: supported values: "Proxy", "VIP"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := allocated(created(res, newService("web")), "10.96.0.10")
			old.Spec.Type = corev1.ServiceTypeLoadBalancer
			svc := old.DeepCopy()
			svc.Status.LoadBalancer.Ingress = tt.ingress
			wantDetails(t, res.ValidateStatus(svc, old), tt.want)
		})
	}
}
