package daemon

import (
	"net/http"

	"google.golang.org/grpc/credentials"

	"github.com/electord/electord/status"
)

// mountStatus serves the status page (package status, and
// docs/STATUS.md): GET /status, its event stream and static files, and
// GET / redirecting to it. The page asks the other members who they think
// leads through their client API, dialled as the API's forwarding dials:
// with this node's certificate when TLS is on, the member answering
// proving the id it is asked as.
func (d *Daemon) mountStatus(mux *http.ServeMux) {
	var peerCreds func(id uint64) credentials.TransportCredentials
	if d.Security != nil {
		peerCreds = d.Security.ForwardCredentials
	}
	s, err := status.New(status.Config{Node: d.Node, PeerCreds: peerCreds, Logger: d.log})
	if err != nil {
		// The templates are embedded and parsed by the package's tests:
		// this is a build that was never tested.
		d.log.Error("status page disabled", "err", err)
		return
	}
	s.Mount(mux)
}
