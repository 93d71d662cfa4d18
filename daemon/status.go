package daemon

import "net/http"

// mountStatus serves the status page (issue 14): to be written.
func (d *Daemon) mountStatus(mux *http.ServeMux) {}
