// Command attackbench measures a single-node electord under the two
// attacks of issue 11 on its peer port, for several binaries and peer
// servers side by side:
//
//		attackbench --bins lf=./electord:lf,grpc=./electord:grpc,lf-old=/tmp/electord-old:lf \
//		            --runs 3 --out docs/bench/attack.md
//
//	  - streams: one connection opens --streams streams (600), each claiming a
//	    --msg (1 MiB) message, and sends --msg - 1 bytes of it without
//	    END_STREAM, as fast as the server's flow-control windows allow
//	    (WINDOW_UPDATEs are honoured; a server that grants unlimited windows
//	    gets it all). Reported: the server's RSS before, its peak while the
//	    connection is open (sampled every 50 ms from /proc/<pid>/status),
//	    the bytes the server accepted, and how it answered (refused streams,
//	    resets, GOAWAY).
//	  - watchers: --watchers (2000) /watch streams on the sidecar and as many
//	    WatchLeader streams on one API connection, held --watch-hold.
//	    Reported: the watches served, refused (503 / ResourceExhausted
//	    naming max-watchers) and left waiting (queued by a connection or
//	    stream cap), and the peak RSS.
//	  - silent: --conns (2000) TCP connections that send nothing. Reported:
//	    how many the server closed within --silent-wait and when (median,
//	    max, from the last connect), and the peak RSS.
//
// Each run starts a fresh electord (`electord --id 1 --peer-server KIND`,
// ports from --port-base, 20000-30000) that elects itself, and checks its
// sidecar's /leader/self every 200 ms throughout: "leader lost" counts the
// checks that did not say it leads. Every child is killed at the end, and
// on SIGINT/SIGTERM. Linux only (it reads /proc).
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

type target struct{ name, path, peerServer string }

func main() {
	bins := flag.String("bins", "", "name=path:peer-server,... (peer-server lf or grpc)")
	runs := flag.Int("runs", 3, "runs of each attack per binary")
	attacks := flag.String("attacks", "streams,silent", "attacks to run: streams, silent, watchers")
	watchers := flag.Int("watchers", 2000, "watches of the watchers attack, on each of /watch and WatchLeader")
	watchHold := flag.Duration("watch-hold", 10*time.Second, "how long the watchers attack holds its watches")
	nStreams := flag.Int("streams", 600, "streams of the streams attack")
	msg := flag.Int("msg", 1<<20, "message size each stream claims")
	conns := flag.Int("conns", 2000, "connections of the silent attack")
	silentWait := flag.Duration("silent-wait", 60*time.Second, "how long to wait for the server to close silent connections")
	portBase := flag.Int("port-base", 21000, "first of the ports used (20000-30000)")
	out := flag.String("out", "", "also write the report here")
	flag.Parse()
	var bs []target
	for _, b := range strings.Split(*bins, ",") {
		name, rest, ok1 := strings.Cut(b, "=")
		path, ps, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			fatalf("bad --bins entry %q", b)
		}
		bs = append(bs, target{name, path, ps})
	}
	if *portBase < 20000 || *portBase > 29990 {
		fatalf("--port-base must be in 20000..29990")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; killAll(); os.Exit(1) }()
	defer killAll()

	var rep bytes.Buffer
	w := io.MultiWriter(os.Stdout, &rep)
	fmt.Fprintf(w, "command: %s\nstart: %s\n\n", strings.Join(os.Args, " "), time.Now().UTC().Format("2006-01-02 15:04:05 UTC"))
	for _, a := range strings.Split(*attacks, ",") {
		switch a {
		case "streams":
			fmt.Fprintf(w, "## streams: 1 connection, %d streams each claiming %d bytes and sending %d\n\n", *nStreams, *msg, *msg-1)
			fmt.Fprintln(w, "| run | binary | RSS before MiB | peak RSS MiB | RSS at end MiB | accepted MiB | refused | resets (other) | GOAWAY | leader lost |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
		case "silent":
			fmt.Fprintf(w, "## silent: %d connections that send nothing (wait %v)\n\n", *conns, *silentWait)
			fmt.Fprintln(w, "| run | binary | RSS before MiB | peak RSS MiB | opened | closed by server | median close s | max close s | leader lost |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		case "watchers":
			fmt.Fprintf(w, "## watchers: %d /watch streams (a connection each) and %d WatchLeader streams on one API connection, held %v\n\n", *watchers, *watchers, *watchHold)
			fmt.Fprintln(w, "| run | binary | RSS before MiB | peak RSS MiB | /watch ok | /watch refused (503) | /watch waiting | WatchLeader ok | WatchLeader refused | WatchLeader waiting | leader lost |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
		default:
			fatalf("unknown attack %q", a)
		}
		for run := 1; run <= *runs; run++ {
			for _, b := range bs {
				n, err := start(b, *portBase)
				if err != nil {
					fmt.Fprintf(w, "| %d | %s | start failed: %v |\n", run, b.name, err)
					continue
				}
				switch a {
				case "streams":
					r := n.streamsAttack(*nStreams, *msg)
					fmt.Fprintf(w, "| %d | %s | %.1f | %.1f | %.1f | %.1f | %d | %s | %s | %d of %d |\n", run, b.name,
						mib(n.before), mib(r.peak), mib(r.end), mib(r.accepted), r.refused, r.resets, r.goaway, n.lost.Load(), n.checks.Load())
				case "watchers":
					r := n.watchersAttack(*watchers, *watchHold)
					fmt.Fprintf(w, "| %d | %s | %.1f | %.1f | %d | %d | %d | %d | %d | %d | %d of %d |\n", run, b.name,
						mib(n.before), mib(r.peak), r.httpOK, r.httpRefused, r.httpWait, r.grpcOK, r.grpcRefused, r.grpcWait, n.lost.Load(), n.checks.Load())
				case "silent":
					r := n.silentAttack(*conns, *silentWait)
					fmt.Fprintf(w, "| %d | %s | %.1f | %.1f | %d | %d | %s | %s | %d of %d |\n", run, b.name,
						mib(n.before), mib(r.peak), r.opened, r.closed, r.median, r.max, n.lost.Load(), n.checks.Load())
				}
				n.stop()
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "end: %s\n", time.Now().UTC().Format("2006-01-02 15:04:05 UTC"))
	if *out != "" {
		if err := os.WriteFile(*out, rep.Bytes(), 0o644); err != nil {
			fatalf("%v", err)
		}
	}
}

func fatalf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "attackbench: "+f+"\n", a...)
	killAll()
	os.Exit(2)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

var (
	childMu  sync.Mutex
	children = map[*exec.Cmd]bool{}
)

func killAll() {
	childMu.Lock()
	defer childMu.Unlock()
	for c := range children {
		_ = c.Process.Kill()
		_, _ = c.Process.Wait()
		delete(children, c)
	}
}

// node is a running single-node electord.
type node struct {
	cmd            *exec.Cmd
	peer, http     string
	api            string
	before         int64 // RSS once it leads
	lost, checks   atomic.Int64
	stopMon, monOK chan struct{}
}

func start(b target, base int) (*node, error) {
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(base+i) }
	n := &node{peer: addr(0), api: addr(1), http: addr(2), stopMon: make(chan struct{}), monOK: make(chan struct{})}
	dir, err := os.MkdirTemp("", "attackbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	n.cmd = exec.Command(b.path, "--id", "1", "--peer-server", b.peerServer, "--peer-addr", n.peer,
		"--api-addr", addr(1), "--http-addr", n.http, "--gossip-addr", addr(3), "--log-level", "error")
	n.cmd.Stdout, n.cmd.Stderr = os.Stderr, os.Stderr
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	childMu.Lock()
	children[n.cmd] = true
	childMu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for !n.leads() {
		if time.Now().After(deadline) {
			n.stop()
			return nil, errors.New("no leader within 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	n.before = rss(n.cmd.Process.Pid)
	go n.monitor()
	return n, nil
}

var httpc = &http.Client{Timeout: time.Second}

// leads reports whether the node's sidecar says it is the leader.
func (n *node) leads() bool {
	resp, err := httpc.Get("http://" + n.http + "/leader/self")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (n *node) monitor() {
	defer close(n.monOK)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stopMon:
			return
		case <-t.C:
			n.checks.Add(1)
			if !n.leads() {
				n.lost.Add(1)
			}
		}
	}
}

func (n *node) stop() {
	select {
	case <-n.stopMon:
	default:
		close(n.stopMon)
		if n.before != 0 {
			<-n.monOK
		}
	}
	_ = n.cmd.Process.Kill()
	_, _ = n.cmd.Process.Wait()
	childMu.Lock()
	delete(children, n.cmd)
	childMu.Unlock()
	time.Sleep(300 * time.Millisecond) // let the ports go
}

// rss returns VmRSS of pid in bytes (0 if unreadable).
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sampler records the peak RSS of pid until stopped.
func sampler(pid int) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			if r := rss(pid); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int64 { close(done); <-finished; return peak.Load() }
}

type streamsResult struct {
	peak, end, accepted int64
	refused             int
	resets, goaway      string
}

// streamsAttack runs the streams attack on one connection.
func (n *node) streamsAttack(nStreams, msg int) streamsResult {
	stopSample := sampler(n.cmd.Process.Pid)
	c, err := net.DialTimeout("tcp", n.peer, 5*time.Second)
	if err != nil {
		return streamsResult{resets: "dial: " + err.Error(), peak: stopSample()}
	}
	a := newAttacker(c)
	a.run(nStreams, msg)
	time.Sleep(3 * time.Second) // hold the streams open
	c.Close()
	peak := stopSample()
	r := streamsResult{peak: peak, end: rss(n.cmd.Process.Pid), accepted: a.sent.Load()}
	a.mu.Lock()
	defer a.mu.Unlock()
	var other []string
	for code, k := range a.rsts {
		if code == http2.ErrCodeRefusedStream {
			r.refused = k
		} else {
			other = append(other, fmt.Sprintf("%d %v", k, code))
		}
	}
	slices.Sort(other)
	r.resets = strings.Join(other, ", ")
	if r.resets == "" {
		r.resets = "none"
	}
	r.goaway = "none"
	if a.goaway != nil {
		r.goaway = a.goaway.String()
	}
	return r
}

// attacker is the client of the streams attack: it honours the windows the
// server grants, and nothing else.
type attacker struct {
	c                net.Conn
	wmu              sync.Mutex // writes
	mu               sync.Mutex
	cond             *sync.Cond
	initWin, connWin int64
	win              map[uint32]int64
	dead             map[uint32]bool
	rsts             map[http2.ErrCode]int
	goaway           *http2.ErrCode
	closed           bool
	sent             atomic.Int64
}

func newAttacker(c net.Conn) *attacker {
	a := &attacker{c: c, initWin: 65535, connWin: 65535, win: map[uint32]int64{}, dead: map[uint32]bool{}, rsts: map[http2.ErrCode]int{}}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func (a *attacker) write(b []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := a.c.Write(b)
	return err
}

func (a *attacker) read() {
	fr := http2.NewFramer(nil, a.c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		a.mu.Lock()
		if err != nil {
			a.closed = true
			a.cond.Broadcast()
			a.mu.Unlock()
			return
		}
		var reply bytes.Buffer
		w := http2.NewFramer(&reply, nil)
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					d := int64(v) - a.initWin
					a.initWin = int64(v)
					for id := range a.win {
						a.win[id] += d
					}
				}
				_ = w.WriteSettingsAck()
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				a.connWin += int64(f.Increment)
			} else {
				a.win[f.StreamID] += int64(f.Increment)
			}
		case *http2.RSTStreamFrame:
			a.rsts[f.ErrCode]++
			a.dead[f.StreamID] = true
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				a.dead[f.StreamID] = true
			}
		case *http2.GoAwayFrame:
			code := f.ErrCode
			a.goaway = &code
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = w.WritePing(true, f.Data)
			}
		}
		a.cond.Broadcast()
		a.mu.Unlock()
		if reply.Len() > 0 {
			_ = a.write(reply.Bytes())
		}
	}
}

// run opens the streams, then sends round robin what the windows allow
// until every stream sent msg-1 bytes or nothing moved for a second.
func (a *attacker) run(nStreams, msg int) {
	go a.read()
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	b.WriteString(http2.ClientPreface)
	_ = fr.WriteSettings()
	_ = a.write(b.Bytes())
	b.Reset()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	left := map[uint32]int{}
	a.mu.Lock()
	for i := range nStreams {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/electord.v1.Peer/Heartbeat"},
			{":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		a.win[id] += a.initWin
		left[id] = msg - 1
	}
	a.mu.Unlock()
	_ = a.write(b.Bytes())
	b.Reset()
	first := map[uint32]bool{}
	lastProgress := time.Now()
	for {
		a.mu.Lock()
		progress := false
		for id, rest := range left {
			if a.closed || a.goaway != nil {
				break
			}
			if a.dead[id] || rest == 0 {
				delete(left, id)
				continue
			}
			k := int(min(int64(rest), 16384, a.win[id], a.connWin))
			if k <= 0 {
				continue
			}
			p := make([]byte, k)
			if !first[id] && k >= 5 {
				first[id] = true
				binary.BigEndian.PutUint32(p[1:5], uint32(msg))
			}
			_ = fr.WriteData(id, false, p)
			a.win[id] -= int64(k)
			a.connWin -= int64(k)
			left[id] = rest - k
			a.sent.Add(int64(k))
			progress = true
			if b.Len() > 256<<10 {
				break
			}
		}
		if progress {
			lastProgress = time.Now()
		}
		done := a.closed || a.goaway != nil || len(left) == 0
		if !progress && !done {
			// Wait for more window; a second without any ends the attack.
			t := time.AfterFunc(200*time.Millisecond, func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
			a.cond.Wait()
			t.Stop()
			done = time.Since(lastProgress) > time.Second
		}
		a.mu.Unlock()
		if b.Len() > 0 {
			if a.write(b.Bytes()) != nil {
				return
			}
			b.Reset()
		}
		if done {
			return
		}
	}
}

type silentResult struct {
	peak           int64
	opened, closed int
	median, max    string
}

// silentAttack opens conns silent connections and waits for the server to
// close them.
func (n *node) silentAttack(conns int, wait time.Duration) silentResult {
	stopSample := sampler(n.cmd.Process.Pid)
	var mu sync.Mutex
	var cs []net.Conn
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", n.peer, 5*time.Second)
			if err == nil {
				mu.Lock()
				cs = append(cs, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	opened := time.Now()
	closedAt := make(chan time.Duration, len(cs))
	deadline := opened.Add(wait)
	for _, c := range cs {
		go func() {
			c.SetReadDeadline(deadline)
			_, err := io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				closedAt <- -1
				return
			}
			closedAt <- time.Since(opened)
		}()
	}
	var ds []time.Duration
	for range cs {
		if d := <-closedAt; d >= 0 {
			ds = append(ds, d)
		}
	}
	for _, c := range cs {
		c.Close()
	}
	r := silentResult{peak: stopSample(), opened: len(cs), closed: len(ds), median: "-", max: "-"}
	if len(ds) > 0 {
		slices.Sort(ds)
		r.median = fmt.Sprintf("%.1f", ds[len(ds)/2].Seconds())
		r.max = fmt.Sprintf("%.1f", ds[len(ds)-1].Seconds())
	}
	return r
}
