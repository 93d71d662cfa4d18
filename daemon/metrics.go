package daemon

import "net/http"

// mountMetrics serves Prometheus /metrics (issue 13): to be written.
func (d *Daemon) mountMetrics(mux *http.ServeMux) {}
