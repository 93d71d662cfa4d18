package k8s

// The pods and PersistentVolumeClaims the StatefulSet controller creates
// for a set, made here as it makes them (k8s.io/kubernetes
// pkg/controller/statefulset, stateful_set_utils.go), because no
// controller manager runs beside the test's API server. The API server
// admits a StatefulSet whatever its pod template would meet at pod
// admission (PodSecurity only warns about a template), so the pods are
// where a manifest's pod is really judged.

import (
	"fmt"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// statefulSetChildren returns every pod of set (ordinals from
// spec.ordinals.start, spec.replicas of them) and every claim of its
// volumeClaimTemplates, as the controller would create them. Left out:
// the controller-revision-hash label (the name of a ControllerRevision
// the controller writes; admission does not look at it).
func statefulSetChildren(set *appsv1.StatefulSet) ([]*unstructured.Unstructured, error) {
	replicas, start := int32(1), int32(0)
	if set.Spec.Replicas != nil {
		replicas = *set.Spec.Replicas
	}
	if set.Spec.Ordinals != nil {
		start = set.Spec.Ordinals.Start
	}
	owner := metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	var out []*unstructured.Unstructured
	for ord := start; ord < start+replicas; ord++ {
		name := fmt.Sprintf("%s-%d", set.Name, ord)
		pod := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       set.Namespace,
				Labels:          maps.Clone(set.Spec.Template.Labels),
				Annotations:     maps.Clone(set.Spec.Template.Annotations),
				OwnerReferences: []metav1.OwnerReference{*owner},
			},
			Spec: *set.Spec.Template.Spec.DeepCopy(),
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		// The pod's identity: its name, its ordinal, and a DNS name under
		// the governing Service.
		pod.Labels[appsv1.StatefulSetPodNameLabel] = name
		pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(int(ord))
		pod.Spec.Hostname = name
		pod.Spec.Subdomain = set.Spec.ServiceName
		for _, tmpl := range set.Spec.VolumeClaimTemplates {
			claimName := tmpl.Name + "-" + name
			claim := &corev1.PersistentVolumeClaim{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{
					Name:        claimName,
					Namespace:   set.Namespace,
					Labels:      maps.Clone(tmpl.Labels),
					Annotations: maps.Clone(tmpl.Annotations),
				},
				Spec: *tmpl.Spec.DeepCopy(),
			}
			if claim.Labels == nil {
				claim.Labels = map[string]string{}
			}
			if set.Spec.Selector != nil {
				maps.Copy(claim.Labels, set.Spec.Selector.MatchLabels)
			}
			u, err := toUnstructured(claim)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
			// The claim replaces a pod volume of the template's name.
			vol := corev1.Volume{Name: tmpl.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
			}}
			replaced := false
			for i := range pod.Spec.Volumes {
				if pod.Spec.Volumes[i].Name == tmpl.Name {
					pod.Spec.Volumes[i], replaced = vol, true
				}
			}
			if !replaced {
				pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
			}
		}
		u, err := toUnstructured(pod)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	// Status is the server's; an apply does not send it.
	delete(u.Object, "status")
	return u, nil
}
