package kubelet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// resolveEnv builds a container's environment as the kubelet does: envFrom
// first, then env in order, each value expanded against the variables
// before it ($(VAR)); valueFrom reads ConfigMaps and Secrets through the
// apiserver, fields of the pod and the container's resources. A missing
// key or object is an error unless marked optional.
func (k *Kubelet) resolveEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sb *container.Sandbox) ([]container.EnvVar, error) {
	svcEnv, err := k.serviceEnv(pod)
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	var order []string
	// $(VAR) sees the container's own variables first, then the
	// Services' (kube's expansion.MappingFuncFor(tmpEnv, serviceEnv)).
	scope := func() map[string]string {
		if len(svcEnv) == 0 {
			return vals
		}
		m := maps.Clone(svcEnv)
		maps.Copy(m, vals)
		return m
	}
	set := func(name, v string) {
		if _, ok := vals[name]; !ok {
			order = append(order, name)
		}
		vals[name] = v
	}
	for _, from := range c.EnvFrom {
		data, err := k.envSource(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for key, v := range data {
			set(from.Prefix+key, v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, scope()))
			continue
		}
		v, ok, err := k.envValueFrom(ctx, pod, c, e.ValueFrom, sb)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]container.EnvVar, 0, len(order)+len(svcEnv))
	for _, n := range order {
		out = append(out, container.EnvVar{Name: n, Value: vals[n]})
	}
	// The Services' variables come last and never replace the
	// container's own, as in the kubelet.
	for _, n := range slices.Sorted(maps.Keys(svcEnv)) {
		if _, own := vals[n]; !own {
			out = append(out, container.EnvVar{Name: n, Value: svcEnv[n]})
		}
	}
	return out, nil
}

func (k *Kubelet) envSource(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := k.client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			if optional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("configmap %q not found: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := k.client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			if optional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("secret %q not found: %w", from.SecretRef.Name, err)
		}
		out := map[string]string{}
		for key, v := range s.Data {
			out[key] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

func optional(b *bool) bool { return b != nil && *b }

// envValueFrom resolves one valueFrom; ok is false for an optional value
// that is absent.
func (k *Kubelet) envValueFrom(ctx context.Context, pod *corev1.Pod, c *corev1.Container, from *corev1.EnvVarSource, sb *container.Sandbox) (string, bool, error) {
	switch {
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := k.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q not found: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return v, ok, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q not found: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), ok, nil
	case from.FieldRef != nil:
		v, err := k.fieldValue(pod, from.FieldRef.FieldPath, sb)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := resourceValue(c, from.ResourceFieldRef)
		return v, err == nil, err
	}
	return "", false, nil
}

// fieldValue is the downward API: the pod fields env and downwardAPI
// volumes may read.
func (k *Kubelet) fieldValue(pod *corev1.Pod, path string, sb *container.Sandbox) (string, error) {
	var podIP string
	var podIPs []string
	if sb != nil && len(sb.IPs) > 0 {
		podIP, podIPs = sb.IPs[0], sb.IPs
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return k.nodeIP, nil
	case "status.podIP":
		return podIP, nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return "", false
	}
	return strings.Trim(strings.TrimSuffix(rest, "]"), `'"`), true
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// resourceValue is a resourceFieldRef: limits.cpu, requests.memory, ...
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	var q resource.Quantity
	switch ref.Resource {
	case "limits.cpu":
		q = *c.Resources.Limits.Cpu()
	case "requests.cpu":
		q = *c.Resources.Requests.Cpu()
	case "limits.memory":
		q = *c.Resources.Limits.Memory()
	case "requests.memory":
		q = *c.Resources.Requests.Memory()
	case "limits.ephemeral-storage":
		q = *c.Resources.Limits.StorageEphemeral()
	case "requests.ephemeral-storage":
		q = *c.Resources.Requests.StorageEphemeral()
	default:
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	// Round up, as the kubelet's ExtractContainerResourceValue does.
	v := (q.MilliValue() + div.MilliValue() - 1) / div.MilliValue()
	if strings.HasSuffix(ref.Resource, "cpu") && v == 0 && !q.IsZero() {
		v = 1
	}
	return fmt.Sprint(v), nil
}

// expand replaces $(VAR) with the value of VAR when it is defined; $$
// escapes a dollar; anything else stays as written (Kubernetes'
// third_party/forked/golang/expansion).
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func expandAll(in []string, env []container.EnvVar) []string {
	if len(in) == 0 {
		return nil
	}
	vals := make(map[string]string, len(env))
	for _, e := range env {
		vals[e.Name] = e.Value
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vals)
	}
	return out
}
