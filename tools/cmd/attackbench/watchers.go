package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	electordv1 "github.com/electord/electord/proto/electord/v1"
)

type watchersResult struct {
	peak                          int64
	httpOK, httpRefused, httpWait int64
	grpcOK, grpcRefused, grpcWait int64
}

// watchersAttack opens w /watch streams on the sidecar (one connection
// each) and w WatchLeader streams on one API connection, all at once, and
// holds them for hold. A watch is "ok" when its first event arrived,
// "refused" when the server said no (503, ResourceExhausted), "waiting"
// when neither happened within hold (a connection or stream cap queues it).
func (n *node) watchersAttack(w int, hold time.Duration) watchersResult {
	stopSample := sampler(n.cmd.Process.Pid)
	var r watchersResult
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	var wg sync.WaitGroup
	var conns sync.Map
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{}
			c, err := d.DialContext(ctx, "tcp", n.http)
			if err != nil {
				atomic.AddInt64(&r.httpWait, 1)
				return
			}
			conns.Store(c, true)
			_ = c.SetDeadline(time.Now().Add(hold))
			_, _ = c.Write([]byte("GET /watch HTTP/1.1\r\nHost: x\r\n\r\n"))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			switch {
			case err != nil:
				atomic.AddInt64(&r.httpWait, 1)
			case resp.StatusCode == http.StatusOK:
				atomic.AddInt64(&r.httpOK, 1)
			default:
				atomic.AddInt64(&r.httpRefused, 1)
			}
		}()
	}
	conn, err := grpc.NewClient(n.api, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		cl := electordv1.NewElectorClient(conn)
		for range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := cl.WatchLeader(ctx, &electordv1.WatchLeaderRequest{})
				if err == nil {
					_, err = s.Recv()
				}
				switch {
				case err == nil:
					atomic.AddInt64(&r.grpcOK, 1)
					<-ctx.Done() // hold it open
				case status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "max-watchers"):
					atomic.AddInt64(&r.grpcRefused, 1)
				default:
					atomic.AddInt64(&r.grpcWait, 1)
				}
			}()
		}
	}
	wg.Wait()
	r.peak = stopSample()
	conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	if conn != nil {
		conn.Close()
	}
	return r
}
