package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cairn-dev/cairn/schemas"
)

func (s *Server) serveSubresource(q *request) {
	switch q.info.Subresource {
	case "scale":
		s.scale(q)
	case "binding":
		if q.info.Verb != "create" {
			writeStatus(q.w, errMethodNotSupported(q.res.GroupResource(), q.info.Verb))
			return
		}
		s.bind(q)
	case "eviction":
		if q.info.Verb != "create" {
			writeStatus(q.w, errMethodNotSupported(q.res.GroupResource(), q.info.Verb))
			return
		}
		s.evict(q)
	case "log", "exec", "attach", "portforward":
		s.proxyToKubelet(q)
	case "token":
		if q.info.Verb != "create" || q.res.Plural != "serviceaccounts" {
			writeStatus(q.w, errMethodNotSupported(q.res.GroupResource(), q.info.Verb))
			return
		}
		s.requestToken(q)
	case "finalize":
		if q.info.Verb != "update" {
			writeStatus(q.w, errMethodNotSupported(q.res.GroupResource(), q.info.Verb))
			return
		}
		s.finalize(q)
	default:
		writeStatus(q.w, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name))
	}
}

// scaleOf renders the autoscaling/v1 Scale of a deployment, replica set or
// stateful set.
func scaleOf(res *schemas.Resource, obj schemas.Object) (*autoscalingv1.Scale, error) {
	if res.Custom != nil && res.Custom.Scale != nil {
		return res.Custom.Scale.Of(obj)
	}
	sc := &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"}}
	sc.Name, sc.Namespace, sc.UID = obj.GetName(), obj.GetNamespace(), obj.GetUID()
	sc.ResourceVersion, sc.CreationTimestamp = obj.GetResourceVersion(), obj.GetCreationTimestamp()
	var sel *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		sc.Spec.Replicas = derefInt32(o.Spec.Replicas)
		sc.Status.Replicas = o.Status.Replicas
		sel = o.Spec.Selector
	case *appsv1.ReplicaSet:
		sc.Spec.Replicas = derefInt32(o.Spec.Replicas)
		sc.Status.Replicas = o.Status.Replicas
		sel = o.Spec.Selector
	case *appsv1.StatefulSet:
		sc.Spec.Replicas = derefInt32(o.Spec.Replicas)
		sc.Status.Replicas = o.Status.Replicas
		sel = o.Spec.Selector
	default:
		return nil, fmt.Errorf("apiserver: no scale for %T", obj)
	}
	if sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err == nil {
			sc.Status.Selector = s.String()
		}
	}
	return sc, nil
}

func setReplicas(res *schemas.Resource, obj schemas.Object, n int32) error {
	if res.Custom != nil && res.Custom.Scale != nil {
		return res.Custom.Scale.SetReplicas(obj, n)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	case *appsv1.StatefulSet:
		o.Spec.Replicas = &n
	}
	return nil
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func (s *Server) scale(q *request) {
	switch q.info.Verb {
	case "get":
		obj, _, err := s.load(q.ctx(), q.res, q.key(), q.info.Name)
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		sc, err := scaleOf(q.res, obj)
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		writeJSON(q.w, http.StatusOK, sc)
	case "update", "patch":
		var body []byte
		var pt string
		var err error
		if q.info.Verb == "patch" {
			pt = mediaType(q.r.Header.Get("Content-Type"))
			switch pt {
			case "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json":
			default:
				writeStatus(q.w, errUnsupportedMedia(pt))
				return
			}
		}
		if body, err = readBody(q.r); err != nil {
			writeStatus(q.w, err)
			return
		}
		scaleRes := &schemas.Resource{Kind: "Scale", Plural: q.res.Plural, GroupVersion: autoscalingv1.SchemeGroupVersion,
			New: func() schemas.Object { return &autoscalingv1.Scale{} }}
		out, _, err := s.guaranteedUpdate(q, func(cur schemas.Object) (schemas.Object, error) {
			if cur == nil {
				return nil, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name)
			}
			curScale, err := scaleOf(q.res, cur)
			if err != nil {
				return nil, err
			}
			want := &autoscalingv1.Scale{}
			if q.info.Verb == "patch" {
				patched, err := applyPatch(scaleRes, pt, curScale, body)
				if err != nil {
					return nil, err
				}
				if err := decodeInto(patched, want, false); err != nil {
					return nil, err
				}
			} else if err := decodeInto(body, want, strictFields(q)); err != nil {
				return nil, err
			}
			if want.Spec.Replicas < 0 {
				return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), q.info.Name,
					fieldErr("spec.replicas", fmt.Sprint(want.Spec.Replicas), "must be greater than or equal to 0"))
			}
			cur.SetResourceVersion(want.ResourceVersion)
			if err := setReplicas(q.res, cur, want.Spec.Replicas); err != nil {
				return nil, err
			}
			return cur, nil
		}, updateOpts{verb: q.info.Verb, preconditionRV: q.info.Verb == "update"})
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		sc, err := scaleOf(q.res, out)
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		writeJSON(q.w, http.StatusOK, sc)
	default:
		writeStatus(q.w, errMethodNotSupported(q.res.GroupResource(), q.info.Verb))
	}
}

// finalize is PUT namespaces/<name>/finalize: it takes only spec.finalizers
// (and the resourceVersion precondition) from the body. A namespace being
// deleted whose spec.finalizers and metadata.finalizers are then both empty
// is deleted (shouldDeleteDuringUpdate).
func (s *Server) finalize(q *request) {
	body, err := readBody(q.r)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	var want corev1.Namespace
	if err := decodeInto(body, &want, strictFields(q)); err != nil {
		writeStatus(q.w, err)
		return
	}
	if want.Name != "" && want.Name != q.info.Name {
		writeStatus(q.w, errBadRequest("the name of the object (%s) does not match the name on the URL (%s)", want.Name, q.info.Name))
		return
	}
	for i, f := range want.Spec.Finalizers {
		if errs := validation.IsQualifiedName(string(f)); len(errs) > 0 && f != corev1.FinalizerKubernetes {
			writeStatus(q.w, apierrors.NewInvalid(q.res.GVK().GroupKind(), q.info.Name,
				fieldErr(fmt.Sprintf("spec.finalizers[%d]", i), string(f), strings.Join(errs, "; "))))
			return
		}
	}
	out, _, err := s.guaranteedUpdate(q, func(cur schemas.Object) (schemas.Object, error) {
		ns, ok := cur.(*corev1.Namespace)
		if !ok {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name)
		}
		ns.Spec.Finalizers = want.Spec.Finalizers
		if want.ResourceVersion != "" {
			ns.ResourceVersion = want.ResourceVersion
		}
		return ns, nil
	}, updateOpts{verb: "update", preconditionRV: true})
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	s.respondObject(q, http.StatusOK, out)
}

// bind sets spec.nodeName of an unbound pod, as POST pods/binding does.
func (s *Server) bind(q *request) {
	body, err := readBody(q.r)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	var b corev1.Binding
	if err := decodeInto(body, &b, strictFields(q)); err != nil {
		writeStatus(q.w, err)
		return
	}
	if b.Name != "" && b.Name != q.info.Name {
		writeStatus(q.w, errBadRequest("the name of the binding (%s) does not match the name on the URL (%s)", b.Name, q.info.Name))
		return
	}
	if b.Target.Name == "" || (b.Target.Kind != "" && b.Target.Kind != "Node") {
		writeStatus(q.w, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), q.info.Name,
			fieldErr("target.name", b.Target.Name, "must name a Node")))
		return
	}
	_, _, err = s.guaranteedUpdate(q, func(cur schemas.Object) (schemas.Object, error) {
		pod, ok := cur.(*corev1.Pod)
		if !ok {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name)
		}
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(q.res.GroupResource(), q.info.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(q.res.GroupResource(), q.info.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(q.res.GroupResource(), q.info.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(s.now().Truncate(1e9))})
		return pod, nil
	}, updateOpts{verb: "create"})
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	writeJSON(q.w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			if pod.Status.Conditions[i].Status == c.Status {
				return
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
