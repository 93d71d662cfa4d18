package leaderslice

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// apiRequest is what the test API server saw of one request.
type apiRequest struct {
	method, path, query, accept, contentType, userAgent string
	body                                                runtime.Object
}

// NewClient's requests are the typed clients' (paths, verbs, protobuf
// bodies, JSON accepted), and the API server's Status errors come back as
// such: a 409 AlreadyExists is not a Conflict, a 404 is NotFound, a 403
// is Forbidden. The writer decides on those.
func TestNewClientTalksToTheAPIServer(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	decode := serializer.NewCodecFactory(scheme).UniversalDeserializer()

	var mu sync.Mutex
	var seen []apiRequest
	answers := map[string]func(w http.ResponseWriter){}
	reply := func(code int, obj any) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(obj)
		}
	}
	status := func(err *apierrors.StatusError) func(http.ResponseWriter) {
		s := err.ErrStatus
		s.APIVersion, s.Kind = "v1", "Status"
		return reply(int(s.Code), s)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := apiRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, accept: r.Header.Get("Accept"),
			contentType: r.Header.Get("Content-Type"), userAgent: r.Header.Get("User-Agent")}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			obj, _, err := decode.Decode(b, nil, nil)
			if err != nil {
				t.Errorf("%s %s: body not decodable: %v", r.Method, r.URL.Path, err)
			}
			req.body = obj
		}
		mu.Lock()
		seen = append(seen, req)
		answer := answers[r.Method+" "+r.URL.Path]
		mu.Unlock()
		if answer == nil {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		answer(w)
	}))
	defer srv.Close()

	const slices = "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices"
	gr := discoveryv1.Resource("endpointslices")
	answers["GET /api/v1/namespaces/ns/services/svc"] = reply(200, corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	})
	answers["GET "+slices+"/svc"] = status(apierrors.NewNotFound(gr, "svc"))
	answers["POST "+slices] = status(apierrors.NewAlreadyExists(gr, "svc"))
	answers["PUT "+slices+"/svc"] = status(apierrors.NewConflict(gr, "svc", io.ErrUnexpectedEOF))
	answers["GET "+slices+"/other"] = status(apierrors.NewForbidden(gr, "other", io.EOF))

	c, err := NewClient(&rest.Config{Host: srv.URL, UserAgent: "electord/test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc, err := c.GetService(ctx, "ns", "svc")
	if err != nil || svc.Name != "svc" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 {
		t.Fatalf("GetService: %+v %v", svc, err)
	}
	if _, err := c.GetEndpointSlice(ctx, "ns", "svc"); !apierrors.IsNotFound(err) {
		t.Errorf("GetEndpointSlice of a missing slice: %v, want NotFound", err)
	}
	if _, err := c.GetEndpointSlice(ctx, "ns", "other"); !apierrors.IsForbidden(err) {
		t.Errorf("GetEndpointSlice without the right: %v, want Forbidden", err)
	}
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", ResourceVersion: "42",
		Annotations: map[string]string{AnnotationTerm: "7"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}
	if _, err := c.CreateEndpointSlice(ctx, "ns", es); !apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		t.Errorf("CreateEndpointSlice of an existing slice: %v, want AlreadyExists (not Conflict)", err)
	}
	if _, err := c.UpdateEndpointSlice(ctx, "ns", es); !apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		t.Errorf("UpdateEndpointSlice with a stale resourceVersion: %v, want Conflict", err)
	}
	answers["PUT "+slices+"/svc"] = func(w http.ResponseWriter) {
		out := es.DeepCopy()
		out.APIVersion, out.Kind, out.ResourceVersion = "discovery.k8s.io/v1", "EndpointSlice", "43"
		reply(200, out)(w)
	}
	if got, err := c.UpdateEndpointSlice(ctx, "ns", es); err != nil || got.ResourceVersion != "43" || got.Annotations[AnnotationTerm] != "7" {
		t.Errorf("UpdateEndpointSlice: %+v %v", got, err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []struct{ method, path string }{
		{"GET", "/api/v1/namespaces/ns/services/svc"},
		{"GET", slices + "/svc"}, {"GET", slices + "/other"},
		{"POST", slices}, {"PUT", slices + "/svc"}, {"PUT", slices + "/svc"},
	}
	if len(seen) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(seen), len(want), seen)
	}
	for i, r := range seen {
		if r.method != want[i].method || r.path != want[i].path || r.query != "" {
			t.Errorf("request %d: %s %s?%s, want %s %s", i, r.method, r.path, r.query, want[i].method, want[i].path)
		}
		if r.userAgent != "electord/test" {
			t.Errorf("request %d: User-Agent %q", i, r.userAgent)
		}
		if !strings.HasPrefix(r.accept, "application/vnd.kubernetes.protobuf") || !strings.Contains(r.accept, "application/json") {
			t.Errorf("request %d: Accept %q, want protobuf then JSON", i, r.accept)
		}
		if r.method == "GET" {
			continue
		}
		if r.contentType != "application/vnd.kubernetes.protobuf" {
			t.Errorf("request %d: Content-Type %q", i, r.contentType)
		}
		got, ok := r.body.(*discoveryv1.EndpointSlice)
		if !ok || got.Name != "svc" || got.ResourceVersion != "42" || got.Annotations[AnnotationTerm] != "7" || len(got.Endpoints) != 1 {
			t.Errorf("request %d: body %+v", i, r.body)
		}
	}
}
