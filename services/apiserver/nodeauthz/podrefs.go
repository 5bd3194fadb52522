package nodeauthz

import corev1 "k8s.io/api/core/v1"

// visitSecrets calls f with the name of every Secret a pod references, as
// kube's podutil.VisitPodSecretNames does over all containers: image pull
// secrets, env and envFrom, and the volume sources that name a secret.
func visitSecrets(pod *corev1.Pod, f func(string)) {
	for _, s := range pod.Spec.ImagePullSecrets {
		f(s.Name)
	}
	visitContainers(pod, func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range from {
			if e.SecretRef != nil {
				f(e.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				f(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	})
	local := func(r *corev1.LocalObjectReference) {
		if r != nil {
			f(r.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.AzureFile != nil:
			f(s.AzureFile.SecretName)
		case s.CephFS != nil:
			local(s.CephFS.SecretRef)
		case s.Cinder != nil:
			local(s.Cinder.SecretRef)
		case s.FlexVolume != nil:
			local(s.FlexVolume.SecretRef)
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				if p.Secret != nil {
					f(p.Secret.Name)
				}
			}
		case s.RBD != nil:
			local(s.RBD.SecretRef)
		case s.Secret != nil:
			f(s.Secret.SecretName)
		case s.ScaleIO != nil:
			local(s.ScaleIO.SecretRef)
		case s.ISCSI != nil:
			local(s.ISCSI.SecretRef)
		case s.StorageOS != nil:
			local(s.StorageOS.SecretRef)
		case s.CSI != nil:
			local(s.CSI.NodePublishSecretRef)
		}
	}
}

// visitConfigMaps calls f with the name of every ConfigMap a pod
// references, as kube's podutil.VisitPodConfigmapNames.
func visitConfigMaps(pod *corev1.Pod, f func(string)) {
	visitContainers(pod, func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range from {
			if e.ConfigMapRef != nil {
				f(e.ConfigMapRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				f(e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	})
	for _, v := range pod.Spec.Volumes {
		switch s := v.VolumeSource; {
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				if p.ConfigMap != nil {
					f(p.ConfigMap.Name)
				}
			}
		case s.ConfigMap != nil:
			f(s.ConfigMap.Name)
		}
	}
}

// visitContainers calls f with the env of every container of the pod:
// init, regular and ephemeral.
func visitContainers(pod *corev1.Pod, f func([]corev1.EnvVar, []corev1.EnvFromSource)) {
	for _, c := range pod.Spec.InitContainers {
		f(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		f(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		f(c.Env, c.EnvFrom)
	}
}
