// Package inject is the sidecar injector of cairn's second example: an
// admission webhook that gives every pod labelled sidecar-inject=true a
// logging sidecar. The sidecar (container "log-sidecar", busybox) follows
// /var/log/app/app.log, on an emptyDir volume ("app-logs") that the
// injector mounts at /var/log/app in every container of the pod, so
// whatever the application writes there shows in
// `kubectl logs POD -c log-sidecar`.
//
// Handler serves AdmissionReview v1 on /mutate (and /healthz). A pod that
// is not labelled, or that already has the sidecar, is allowed unchanged;
// the sidecar is added by a JSONPatch.
package inject

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names the injector uses.
const (
	Label         = "sidecar-inject"
	SidecarName   = "log-sidecar"
	VolumeName    = "app-logs"
	LogDir        = "/var/log/app"
	DefaultImage  = "cairn.local/busybox:1.36"
	annotationKey = "sidecar-injector.cairn.dev/injected"
)

// Injector patches pods.
type Injector struct {
	// Image of the sidecar; empty means DefaultImage.
	Image string
}

// sidecar is the container added.
func (in Injector) sidecar() corev1.Container {
	img := in.Image
	if img == "" {
		img = DefaultImage
	}
	return corev1.Container{
		Name:            SidecarName,
		Image:           img,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"sh", "-c",
			"touch " + LogDir + "/app.log && echo log-sidecar: following " + LogDir + "/app.log && exec tail -F " + LogDir + "/app.log"},
		VolumeMounts: []corev1.VolumeMount{{Name: VolumeName, MountPath: LogDir}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: mustQuantity("10m"), corev1.ResourceMemory: mustQuantity("8Mi")}},
	}
}

type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Wants reports whether pod should get the sidecar.
func Wants(pod *corev1.Pod) bool {
	if pod.Labels[Label] != "true" {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == SidecarName {
			return false
		}
	}
	return true
}

// Patch is the JSONPatch that adds the sidecar, the volume and its mount
// in every container, and an annotation; nil if the pod does not want it.
func (in Injector) Patch(pod *corev1.Pod) ([]byte, error) {
	if !Wants(pod) {
		return nil, nil
	}
	var ops []op
	vol := corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	if len(pod.Spec.Volumes) == 0 {
		ops = append(ops, op{"add", "/spec/volumes", []corev1.Volume{vol}})
	} else {
		ops = append(ops, op{"add", "/spec/volumes/-", vol})
	}
	mount := corev1.VolumeMount{Name: VolumeName, MountPath: LogDir}
	for i, c := range pod.Spec.Containers {
		if len(c.VolumeMounts) == 0 {
			ops = append(ops, op{"add", fmt.Sprintf("/spec/containers/%d/volumeMounts", i), []corev1.VolumeMount{mount}})
		} else {
			ops = append(ops, op{"add", fmt.Sprintf("/spec/containers/%d/volumeMounts/-", i), mount})
		}
	}
	ops = append(ops, op{"add", "/spec/containers/-", in.sidecar()})
	if len(pod.Annotations) == 0 {
		ops = append(ops, op{"add", "/metadata/annotations", map[string]string{annotationKey: SidecarName}})
	} else {
		ops = append(ops, op{"add", "/metadata/annotations/" + escape(annotationKey), SidecarName})
	}
	return json.Marshal(ops)
}

// escape is JSON Pointer escaping (RFC 6901).
func escape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}

// Review answers one AdmissionRequest.
func (in Injector) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Kind.Kind != "Pod" || req.Object.Raw == nil {
		return resp
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return &admissionv1.AdmissionResponse{UID: req.UID, Result: &metav1.Status{Code: http.StatusBadRequest, Message: "undecodable pod: " + err.Error()}}
	}
	patch, err := in.Patch(&pod)
	if err != nil {
		return &admissionv1.AdmissionResponse{UID: req.UID, Result: &metav1.Status{Code: http.StatusInternalServerError, Message: err.Error()}}
	}
	if patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
		resp.AuditAnnotations = map[string]string{"injected": SidecarName}
	}
	return resp
}

// Handler serves /mutate and /healthz.
func (in Injector) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "expected an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = in.Review(review.Request)
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})
	return mux
}
