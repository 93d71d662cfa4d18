package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// newPauseCmd is a pod's pause container in the scratch image: it holds a
// network namespace and does nothing until SIGTERM or SIGINT. The Docker
// fault harness (internal/faultnet) runs each node's electord container in
// the namespace of one of these, as Kubernetes runs a pod's containers in
// its pause container's: when electord dies, its address stays up and the
// kernel refuses connections to it, as on a real host.
func newPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pause",
		Short:  "Hold a network namespace and wait for SIGTERM (a pod's pause container)",
		Args:   cobra.NoArgs,
		Hidden: true,
		Run: func(*cobra.Command, []string) {
			ch := make(chan os.Signal, 1)
			signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
			<-ch
		},
	}
}
