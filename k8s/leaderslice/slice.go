package leaderslice

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/electord/electord/election"
)

// build returns the slice naming this pod alone with term: a copy of old
// (its resourceVersion, labels and annotations kept) or a new one.
func (w *Writer) build(old *discoveryv1.EndpointSlice, svc *corev1.Service, term election.Term) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{}
	if old != nil {
		es = old.DeepCopy()
	}
	es.Name, es.Namespace = w.cfg.Service, w.cfg.Namespace
	if es.Labels == nil {
		es.Labels = map[string]string{}
	}
	es.Labels[discoveryv1.LabelServiceName] = w.cfg.Service
	es.Labels[discoveryv1.LabelManagedBy] = ManagedBy
	if es.Annotations == nil {
		es.Annotations = map[string]string{}
	}
	es.Annotations[AnnotationTerm] = strconv.FormatUint(uint64(term), 10)
	es.Annotations[AnnotationTermHuman] = term.String()
	es.Annotations[AnnotationPod] = w.cfg.PodName
	if w.cfg.Election != "" {
		es.Annotations[AnnotationElection] = w.cfg.Election
	} else {
		delete(es.Annotations, AnnotationElection)
	}
	if old == nil {
		// No ownerReferences: the slice outlives its Service and keeps
		// the recorded term (see the package comment).
		es.AddressType = w.af
	}
	yes, no := true, false
	es.Endpoints = []discoveryv1.Endpoint{{
		Addresses:  []string{w.ip},
		Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: w.cfg.Namespace, Name: w.cfg.PodName},
	}}
	es.Ports = Ports(svc)
	return es
}

// Ports maps the Service's ports to the slice's: each keeps its name,
// protocol and appProtocol; the port is the Service's targetPort when it is
// a number, else (unset, or a name, which only a pod spec could resolve)
// the Service's port.
func Ports(svc *corev1.Service) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, p := range svc.Spec.Ports {
		port := p.Port
		if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal != 0 {
			port = p.TargetPort.IntVal
		}
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, discoveryv1.EndpointPort{
			Name: new(p.Name), Protocol: new(proto), Port: new(port), AppProtocol: p.AppProtocol,
		})
	}
	return out
}

// RecordedTerm reads the slice's fencing term (0 when it has none).
func RecordedTerm(es *discoveryv1.EndpointSlice) (uint64, error) {
	s, ok := es.Annotations[AnnotationTerm]
	if !ok || s == "" {
		return 0, nil
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("EndpointSlice %s/%s: annotation %s=%q is not a term (a decimal integer); fix or delete it", es.Namespace, es.Name, AnnotationTerm, s)
	}
	return t, nil
}

// sameSlice reports whether writing want over have would change nothing
// the writer owns.
func sameSlice(have, want *discoveryv1.EndpointSlice) bool {
	for _, k := range []string{AnnotationTerm, AnnotationTermHuman, AnnotationPod, AnnotationElection} {
		if have.Annotations[k] != want.Annotations[k] {
			return false
		}
	}
	return have.Labels[discoveryv1.LabelServiceName] == want.Labels[discoveryv1.LabelServiceName] &&
		have.Labels[discoveryv1.LabelManagedBy] == want.Labels[discoveryv1.LabelManagedBy] &&
		equality.Semantic.DeepEqual(have.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(have.Ports, want.Ports)
}
