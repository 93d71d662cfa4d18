package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
)

// BenchmarkSidecarLeader is the sidecar's GET /leader handler alone (no
// network): what it costs per request beside a bare handler writing the
// same bytes and headers (BenchmarkBareLeader).
func BenchmarkSidecarLeader(b *testing.B) {
	c := apitest.NewCluster(3)
	c.Elect(3)
	h := api.NewHTTPHandler(c.Node(1))
	req := httptest.NewRequest(http.MethodGet, "/leader", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}

func BenchmarkBareLeader(b *testing.B) {
	c := apitest.NewCluster(3)
	c.Elect(3)
	w0 := httptest.NewRecorder()
	api.NewHTTPHandler(c.Node(1)).ServeHTTP(w0, httptest.NewRequest(http.MethodGet, "/leader", nil))
	body := w0.Body.Bytes()
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	})
	req := httptest.NewRequest(http.MethodGet, "/leader", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}
