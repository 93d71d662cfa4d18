package leaderslice

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// clientset is a Client over a kubernetes.Interface (client-go's fake
// clientset, with its reactors), for tests only: the product's Client
// (NewClient) links neither the clientset nor its scheme of every API
// group.
type clientset struct{ kubernetes.Interface }

func (c clientset) GetService(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	return c.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c clientset) GetEndpointSlice(ctx context.Context, namespace, name string) (*discoveryv1.EndpointSlice, error) {
	return c.DiscoveryV1().EndpointSlices(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c clientset) CreateEndpointSlice(ctx context.Context, namespace string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	return c.DiscoveryV1().EndpointSlices(namespace).Create(ctx, es, metav1.CreateOptions{})
}

func (c clientset) UpdateEndpointSlice(ctx context.Context, namespace string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	return c.DiscoveryV1().EndpointSlices(namespace).Update(ctx, es, metav1.UpdateOptions{})
}
