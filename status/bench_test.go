package status_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/electord/electord/daemon/devcluster"
	"github.com/electord/electord/status"
)

// BenchmarkPoll is one round of the poller of an open page on a follower
// of a five-node cluster: ask the four other members who leads (gRPC on
// loopback, connections kept), build the view and render it. While a page
// is open this runs once a second (and on each leadership change).
func BenchmarkPoll(b *testing.B) {
	c, err := devcluster.Start(devcluster.Options{Nodes: 5, Algorithm: "bully", LogLevel: "warn"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for c.Nodes[0].Node.Leader().ID != 5 {
		if time.Now().After(deadline) {
			b.Fatal("no leader within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	srv, err := status.New(status.Config{Node: c.Nodes[0].Node})
	if err != nil {
		b.Fatal(err)
	}
	p := srv.NewPoller()
	defer p.Close()
	if _, err := p.Render(); err != nil { // dial once, as the poller's first round does
		b.Fatal(err)
	}
	b.ReportAllocs()
	var size int
	cpu0 := cpuTime(b)
	for b.Loop() {
		view, err := p.Render()
		if err != nil {
			b.Fatal(err)
		}
		size = len(view)
	}
	// CPU of the whole process: the poll and the four members' answers
	// (the cluster's idle heartbeats and gossip are in it too).
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(size), "view-bytes")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
