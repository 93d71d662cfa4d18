//go:build linux

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	pb "github.com/electord/electord/proto/electord/v1"
)

// shape is one load pattern.
type shape struct {
	name    string
	mode    string // "closed", "heartbeat", "idle"
	conns   int
	callers int
	payload int
}

func shapeList(hbPeers, idleConns int) []shape {
	return []shape{
		{name: "latency", mode: "closed", conns: 1, callers: 1, payload: 64},
		{name: "4x16", mode: "closed", conns: 4, callers: 16, payload: 64},
		{name: "64x128", mode: "closed", conns: 64, callers: 128, payload: 64},
		{name: "4x16-100KB", mode: "closed", conns: 4, callers: 16, payload: 100 << 10},
		{name: "heartbeat", mode: "heartbeat", conns: hbPeers},
		{name: "idle", mode: "idle", conns: idleConns},
	}
}

// result is one (run, shape, kind) measurement.
type result struct {
	Run   int
	Shape string
	Kind  string
	Fail  string // non-empty: the measurement failed, this says how

	Calls      uint64
	Window     time.Duration
	QPS        float64
	P50        time.Duration
	P99        time.Duration
	P999       time.Duration
	SrvCPUus   float64 // server CPU µs per call
	SrvCore    float64 // server CPU, fraction of one core over the window
	CliCore    float64 // client CPU, fraction of one core over the window
	SrvWait    float64 // server threads' run-queue wait / window (CPU lost to other load)
	CliWait    float64 // the same for the client
	Load       float64 // 1-minute load average after the window
	Errors     uint64
	FirstError string
	Offered    float64       // heartbeat: calls/s offered
	Dropped    uint64        // heartbeat: sends skipped, peer backlog full
	SchedLag   time.Duration // heartbeat: how far the client's schedule ran behind at the window's end

	RSSPerConn   float64 // idle: bytes
	HeapPerConn  float64 // idle: bytes (HeapInuse)
	StackPerConn float64 // idle: bytes (StackInuse)
	Goroutines   float64 // idle: server goroutines per conn
}

type loadOpts struct {
	duration time.Duration
	warmup   time.Duration
	hbPeriod time.Duration
	timeout  time.Duration // per call
	client   string        // closed-loop Echo shapes: "raw" (rawclient.go) or "grpc" (grpc-go)
}

// dialN opens n ClientConns to addr and makes one Echo call on each, so
// every one is connected (grpc.NewClient connects lazily).
func dialN(ctx context.Context, addr string, n int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	creds := insecure.NewCredentials()
	if clientTLS != nil {
		creds = credentials.NewTLS(clientTLS)
	}
	for i := range conns {
		cc, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
		if err != nil {
			closeAll(conns[:i])
			return nil, err
		}
		conns[i] = cc
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			errs[i] = cc.Invoke(cctx, echoMethod, wrapperspb.Bytes([]byte("x")), new(wrapperspb.BytesValue), grpc.WaitForReady(true))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("connect %d/%d: %w", i+1, n, err)
		}
	}
	return conns, nil
}

// dialRun makes the context of one run of a grpc-go load and dials its
// sh.conns ClientConns to srv (dialN).
func dialRun(srv *child, sh shape) (context.Context, context.CancelFunc, []*grpc.ClientConn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	conns, err := dialN(ctx, srv.addr, sh.conns)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, conns, nil
}

func closeAll(conns []*grpc.ClientConn) {
	var wg sync.WaitGroup
	for _, cc := range conns {
		if cc != nil {
			wg.Add(1)
			go func() { defer wg.Done(); cc.Close() }()
		}
	}
	wg.Wait()
}

// window brackets the measured interval: samples count only while on.
type window struct {
	on       atomic.Bool
	h        hist
	calls    atomic.Uint64
	errs     atomic.Uint64
	firstErr atomic.Pointer[string]
}

func (w *window) record(start time.Time, err error) {
	if !w.on.Load() {
		return
	}
	if err != nil {
		if w.errs.Add(1) == 1 {
			s := err.Error()
			w.firstErr.Store(&s)
		}
		return
	}
	w.h.add(time.Since(start))
	w.calls.Add(1)
}

// measure runs the window: warm up, then read both processes' CPU, open the
// window for d, close it and read CPU again.
func measure(srv *child, w *window, o loadOpts, r *result) error {
	time.Sleep(o.warmup)
	s0, err := srv.cpuTicks()
	if err != nil {
		return err
	}
	c0, _ := cpuTicks("self")
	sd0, cd0 := runDelay(srv.pid), runDelay("self")
	t0 := time.Now()
	w.on.Store(true)
	time.Sleep(o.duration)
	w.on.Store(false)
	el := time.Since(t0)
	s1, err := srv.cpuTicks()
	if err != nil {
		return err
	}
	c1, _ := cpuTicks("self")
	sd1, cd1 := runDelay(srv.pid), runDelay("self")
	r.SrvWait = float64(sd1-sd0) / float64(el)
	r.CliWait = float64(cd1-cd0) / float64(el)
	r.Load = loadAvg1()

	r.Window = el
	r.Calls = w.calls.Load()
	r.Errors = w.errs.Load()
	if p := w.firstErr.Load(); p != nil {
		r.FirstError = *p
	}
	r.QPS = float64(r.Calls) / el.Seconds()
	r.P50, r.P99, r.P999 = w.h.quantile(0.50), w.h.quantile(0.99), w.h.quantile(0.999)
	srvSec := float64(s1-s0) / userHZ
	r.SrvCore = srvSec / el.Seconds()
	r.CliCore = float64(c1-c0) / userHZ / el.Seconds()
	if r.Calls > 0 {
		r.SrvCPUus = srvSec * 1e6 / float64(r.Calls)
	}
	return nil
}

// runClosed: conns ClientConns, callers goroutines each calling Echo back
// to back on conns[i%conns]; with the raw client, conns raw connections
// keeping callers calls outstanding in total (runClosedRaw).
func runClosed(srv *child, sh shape, o loadOpts, r *result) error {
	if o.client == "raw" {
		return runClosedRaw(srv, sh, o, r)
	}
	ctx, cancel, conns, err := dialRun(srv, sh)
	if err != nil {
		return err
	}
	defer cancel()
	defer closeAll(conns)
	payload := make([]byte, sh.payload)
	for i := range payload {
		payload[i] = byte(i)
	}
	var w window
	var wg sync.WaitGroup
	for i := 0; i < sh.callers; i++ {
		cc := conns[i%len(conns)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := wrapperspb.Bytes(payload)
			for ctx.Err() == nil {
				out := new(wrapperspb.BytesValue)
				cctx, ccancel := context.WithTimeout(ctx, o.timeout)
				t := time.Now()
				err := cc.Invoke(cctx, echoMethod, in, out)
				ccancel()
				if err == nil && len(out.Value) != len(payload) {
					err = fmt.Errorf("echo returned %d bytes, sent %d", len(out.Value), len(payload))
				}
				w.record(t, err)
			}
		}()
	}
	err = measure(srv, &w, o, r)
	cancel()
	wg.Wait()
	return err
}

// runClosedRaw is runClosed with the raw client: the same shape, calls
// and window, at a fraction of grpc-go's client CPU per call.
func runClosedRaw(srv *child, sh shape, o loadOpts, r *result) error {
	payload := make([]byte, sh.payload)
	for i := range payload {
		payload[i] = byte(i)
	}
	var w window
	l, err := startRawLoad(srv.addr, sh.conns, sh.callers, payload, o.timeout, w.record)
	if err != nil {
		return err
	}
	err = measure(srv, &w, o, r)
	if lerr := l.stop(); lerr != nil && err == nil && r.Errors == 0 {
		// A connection failed outside the window (its calls were lost
		// without being counted): the measurement is not sound.
		err = fmt.Errorf("raw client connection failed: %w", lerr)
	}
	return err
}

// runHeartbeat: sh.conns peers, one ClientConn each, each sending
// Peer.Heartbeat every o.hbPeriod, phases spread evenly over the period,
// open loop. One scheduler goroutine stamps each send with its due time
// and hands it to the peer's sender goroutine through a queue of 64; a
// sender calls back to back, so a slow answer delays that peer's next
// heartbeat (as a real node's sender would) but never the schedule.
// Latency runs from the due time, so lateness on either side is counted
// (no coordinated omission). A send due while its peer's queue is full is
// skipped and counted as Dropped.
func runHeartbeat(srv *child, sh shape, o loadOpts, r *result) error {
	ctx, cancel, conns, err := dialRun(srv, sh)
	if err != nil {
		return err
	}
	defer cancel()
	defer closeAll(conns)
	var w window
	var dropped atomic.Uint64
	var lastDue atomic.Int64 // due time (UnixNano) of the latest send the schedule handed out
	var wg sync.WaitGroup
	queues := make([]chan time.Time, len(conns))
	for i, cc := range conns {
		q := make(chan time.Time, 64)
		queues[i] = q
		from := uint64(selfID) + 1 + uint64(i)
		hb := &pb.Heartbeat{From: from, To: uint64(selfID), Term: 1<<16 | uint64(selfID), Leader: uint64(selfID)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var due time.Time
				select {
				case due = <-q:
				case <-ctx.Done():
					return
				}
				cctx, ccancel := context.WithTimeout(ctx, o.timeout)
				out := new(pb.HeartbeatReply)
				err := cc.Invoke(cctx, "/electord.v1.Peer/Heartbeat", hb, out)
				ccancel()
				if err == nil && (out.GetTo() != from || out.GetFrom() != uint64(selfID)) {
					err = fmt.Errorf("heartbeat reply from %d to %d, want %d to %d", out.GetFrom(), out.GetTo(), selfID, from)
				}
				w.record(due, err)
			}
		}()
	}
	wg.Add(1)
	go func() { // the schedule
		defer wg.Done()
		n := len(queues)
		start := time.Now()
		for j := 0; ; j++ {
			due := start.Add(time.Duration(float64(j) * float64(o.hbPeriod) / float64(n)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			} else if ctx.Err() != nil {
				return
			}
			lastDue.Store(due.UnixNano())
			select {
			case queues[j%n] <- due:
			default:
				if w.on.Load() {
					dropped.Add(1)
				}
			}
		}
	}()
	err = measure(srv, &w, o, r)
	r.SchedLag = time.Since(time.Unix(0, lastDue.Load()))
	cancel()
	wg.Wait()
	r.Offered = float64(sh.conns) / o.hbPeriod.Seconds()
	r.Dropped = dropped.Load()
	return err
}

// runIdle: server memory before and after sh.conns connected, idle
// ClientConns (each made one tiny call). The server runs a GC before each
// reading.
func runIdle(srv *child, sh shape, r *result) error {
	before, err := srv.stats()
	if err != nil {
		return err
	}
	conns, err := dialN(context.Background(), srv.addr, sh.conns)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	time.Sleep(time.Second) // let both sides settle (grpc-go's BDP pings, buffers)
	after, err := srv.stats()
	if err != nil {
		return err
	}
	n := float64(sh.conns)
	r.Calls = uint64(sh.conns)
	r.RSSPerConn = (float64(after.RSS) - float64(before.RSS)) / n
	r.HeapPerConn = (float64(after.HeapInuse) - float64(before.HeapInuse)) / n
	r.StackPerConn = (float64(after.StackInuse) - float64(before.StackInuse)) / n
	r.Goroutines = float64(after.Goroutines-before.Goroutines) / n
	return nil
}

// runOne starts a fresh server of kind, runs sh against it and stops it.
func runOne(so serveOpts, sh shape, o loadOpts, run int) result {
	r := result{Run: run, Shape: sh.name, Kind: so.kind}
	srv, err := startChild(so)
	if err != nil {
		r.Fail = err.Error()
		return r
	}
	type outcome struct{ err error }
	done := make(chan outcome, 1)
	go func() {
		var err error
		switch sh.mode {
		case "closed":
			err = runClosed(srv, sh, o, &r)
		case "heartbeat":
			err = runHeartbeat(srv, sh, o, &r)
		case "idle":
			err = runIdle(srv, sh, &r)
		}
		done <- outcome{err}
	}()
	limit := o.warmup + o.duration + 2*o.timeout + 60*time.Second
	select {
	case out := <-done:
		if out.err != nil {
			r.Fail = out.err.Error()
		}
	case <-time.After(limit):
		srv.kill()
		r.Fail = fmt.Sprintf("hang: shape did not finish within %v (server killed)", limit)
		<-done
	}
	if err := srv.stop(); err != nil && r.Fail == "" {
		r.Fail = err.Error()
	}
	return r
}
