package leaderslice

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Client is the part of the Kubernetes API the writer uses: it reads the
// Service, and reads, creates and updates the Service's EndpointSlice.
// Errors are the API server's (apierrors.IsNotFound, IsConflict,
// IsAlreadyExists and IsForbidden tell them apart). NewClient makes one;
// tests can wrap client-go's fake clientset.
type Client interface {
	GetService(ctx context.Context, namespace, name string) (*corev1.Service, error)
	GetEndpointSlice(ctx context.Context, namespace, name string) (*discoveryv1.EndpointSlice, error)
	CreateEndpointSlice(ctx context.Context, namespace string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error)
	// UpdateEndpointSlice replaces the slice named es.Name; the API server
	// refuses it with a Conflict unless es carries the resourceVersion it
	// holds.
	UpdateEndpointSlice(ctx context.Context, namespace string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error)
}

// NewClient builds a Client from cfg on client-go's rest package, with a
// scheme of its own that holds core/v1 and discovery/v1 only. client-go's
// typed clients import k8s.io/client-go/kubernetes/scheme, which registers
// every API group's types when the process starts, k8s routing on or not
// (about 19 MB of every electord's idle memory, docs/BENCHMARKS.md). The
// requests are those of the typed clients: protobuf preferred, JSON
// accepted.
func NewClient(cfg *rest.Config) (Client, error) {
	scheme := runtime.NewScheme()
	// Each AddToScheme also registers metav1's option types (GetOptions,
	// CreateOptions, UpdateOptions) and Status in its group version.
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	codecs := serializer.NewCodecFactory(scheme)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	core, err := groupClient(cfg, httpClient, "/api", corev1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	disc, err := groupClient(cfg, httpClient, "/apis", discoveryv1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	return &restClient{core: core, disc: disc, params: runtime.NewParameterCodec(scheme)}, nil
}

// groupClient is a RESTClient for one group version, sharing httpClient
// (one connection pool for both groups).
func groupClient(cfg *rest.Config, httpClient *http.Client, apiPath string, gv schema.GroupVersion, codecs serializer.CodecFactory) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = apiPath
	c.GroupVersion = &gv
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientForConfigAndClient(c, httpClient)
}

type restClient struct {
	core, disc rest.Interface
	params     runtime.ParameterCodec
}

func (c *restClient) GetService(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	err := c.core.Get().UseProtobufAsDefault().Namespace(namespace).Resource("services").Name(name).
		VersionedParams(&metav1.GetOptions{}, c.params).Do(ctx).Into(svc)
	return svc, err
}

func (c *restClient) GetEndpointSlice(ctx context.Context, namespace, name string) (*discoveryv1.EndpointSlice, error) {
	es := &discoveryv1.EndpointSlice{}
	err := c.disc.Get().UseProtobufAsDefault().Namespace(namespace).Resource("endpointslices").Name(name).
		VersionedParams(&metav1.GetOptions{}, c.params).Do(ctx).Into(es)
	return es, err
}

func (c *restClient) CreateEndpointSlice(ctx context.Context, namespace string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := c.disc.Post().UseProtobufAsDefault().Namespace(namespace).Resource("endpointslices").
		VersionedParams(&metav1.CreateOptions{}, c.params).Body(es).Do(ctx).Into(out)
	return out, err
}

func (c *restClient) UpdateEndpointSlice(ctx context.Context, namespace string, es *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := c.disc.Put().UseProtobufAsDefault().Namespace(namespace).Resource("endpointslices").Name(es.Name).
		VersionedParams(&metav1.UpdateOptions{}, c.params).Body(es).Do(ctx).Into(out)
	return out, err
}
