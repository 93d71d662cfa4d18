// Command pause is a pod's pause container for the Docker fault harness
// (tools/faultnet): it holds a network namespace and does nothing until
// SIGTERM or SIGINT. Each node's electord container runs in the namespace
// of one of these, as Kubernetes runs a pod's containers in its pause
// container's, so that when electord dies its address stays up and the
// kernel refuses connections to it, as on a real host.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
}
