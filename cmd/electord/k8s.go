package main

import (
	"log/slog"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
)

// startK8s starts leader-only routing (issue 13) when k8s-leader-service
// is set: to be written. The returned func stops it.
func startK8s(cfg config.Config, d *daemon.Daemon, log *slog.Logger) (func(), error) {
	return func() {}, nil
}
