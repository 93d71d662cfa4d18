package node

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electord/electord/config"
	"github.com/electord/electord/election"
)

// BenchmarkNamedStart: five in-process nodes (memory transport, the
// product's timings), whose apps all open their campaigns in N elections
// (ELECTORD_BENCH_ELECTIONS, default 1,000) at once, one stream each, as
// the replicas of a sharded service starting together do. Reported: the
// time from the campaigns opening until every node agrees on every
// election (agree-ms), and the named messages the nodes sent meanwhile,
// per election (msgs/election; ideal about 32: 20 Candidacies, the
// leader's 4 with its term and its 4 Coordinators, and the followers'
// heartbeats), with the Candidacies and Coordinators apart; every attempt
// counts, the refused as overloaded too (inbox-full/election).
//
//	ELECTORD_BENCH_ELECTIONS=10000 go test ./node -run '^$' -bench NamedStart -benchtime 1x
//
// ELECTORD_BENCH_STARTPROFILE=FILE writes a CPU profile of the start to
// FILE.bully and FILE.ring; ELECTORD_BENCH_STARTTRACE=NAME logs every
// message of election NAME (e.g. shard-7).
func BenchmarkNamedStart(b *testing.B) {
	k := benchElections()
	for _, algo := range []string{"bully", "ring"} {
		b.Run(algo, func(b *testing.B) {
			for range b.N {
				agree, sent, full := namedStart(b, algo, k)
				b.ReportMetric(float64(agree.Microseconds())/1000, "agree-ms")
				total := 0
				for _, v := range sent {
					total += int(v)
				}
				b.ReportMetric(float64(total)/float64(k), "msgs/election")
				b.ReportMetric(float64(sent[election.MsgCandidacy])/float64(k), "candidacies/election")
				b.ReportMetric(float64(sent[election.MsgCoordinator])/float64(k), "coordinators/election")
				b.ReportMetric(float64(full)/float64(k), "inbox-full/election")
			}
		})
	}
}

func namedStart(b *testing.B, algo string, k int) (time.Duration, [election.LastMsgType + 1]int64, uint64) {
	d := config.Default()
	c := newTunedCluster(b, algo, 5, 0, nil, func(cfg *Config) {
		cfg.Tick, cfg.HeartbeatInterval, cfg.HeartbeatTimeout = d.Tick, d.HeartbeatInterval, d.HeartbeatTimeout
	})
	c.agree(30*time.Second, 0)
	var sent [election.LastMsgType + 1]atomic.Int64
	var start time.Time
	traced := os.Getenv("ELECTORD_BENCH_STARTTRACE")
	c.net.SetHook(func(m election.Message) bool {
		if m.Election != "" && m.Type.Valid() {
			sent[m.Type].Add(1)
		}
		if m.Election == traced && traced != "" {
			fmt.Fprintf(os.Stderr, "%8.1f ms %d>%d %v term=%d leader=%d support=%d\n", float64(time.Since(start).Microseconds())/1000,
				m.From, m.To, m.Type, m.Term, m.Leader, m.Support)
		}
		return true
	})
	var full0 uint64
	for _, nd := range c.nodes {
		full0 += nd.Counters().InboxFull.Load()
	}
	opts := shardNames(k)
	stop := recordTo(b, "ELECTORD_BENCH_STARTPROFILE", algo, pprof.StartCPUProfile, pprof.StopCPUProfile)
	start = time.Now()
	c.standTogether(b, opts)
	for left := k; left > 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 120*time.Second {
			b.Fatalf("%s: %d of %d elections not agreed in 120 s", algo, left, k)
		}
		left = c.notAgreed(opts)
	}
	agree := time.Since(start)
	stop()
	var out [election.LastMsgType + 1]int64
	for t := range sent {
		out[t] = sent[t].Load()
	}
	var full uint64
	for _, nd := range c.nodes {
		full += nd.Counters().InboxFull.Load()
	}
	return agree, out, full - full0
}
