package daemon

import "net/http"

// opsMux is what health-addr serves: health for the kubelet's probes
// (health.go), Prometheus metrics (metrics.go) and the status page
// (status.go). Each part mounts its own paths.
func (d *Daemon) opsMux() *http.ServeMux {
	mux := http.NewServeMux()
	d.mountHealth(mux)
	d.mountMetrics(mux)
	d.mountStatus(mux)
	return mux
}
