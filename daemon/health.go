package daemon

import "net/http"

// mountHealth serves /healthz, /readyz and /livez (issue 13): to be written.
func (d *Daemon) mountHealth(mux *http.ServeMux) {}
