// Command etcdcandidate is one candidate of an etcd election, as an
// application that uses go.etcd.io/etcd/client/v3/concurrency would run it:
//
//	etcdcandidate --endpoints 127.0.0.1:2379 --name c1 [--ttl 2] [--prefix /vsetcd/election]
//
// It opens a session (a lease kept alive by the client) with the given TTL,
// watches the election with Election.Observe and campaigns with
// Election.Campaign. On SIGTERM (or SIGINT) it resigns if it leads, closes the
// session (revoking the lease) and exits 0; SIGKILL just kills it, and the
// lease expires after its TTL.
//
// Every event is one line on stdout, with the wall clock (Unix nanoseconds)
// at which this process learned of it, so that a harness on the same machine
// can compare times across processes (see bench/README.md):
//
//	ready <ns> <name> <lease-id-hex> <granted-ttl-seconds>
//	observe <ns> <leader-name> <leader-key-create-revision>
//	elected <ns> <name>
//	resigned <ns> <name>
//	error <ns> <message...>
//
// An observe line reports the leader every candidate sees: the value of the
// election key with the lowest create revision. elected is this candidate's
// Campaign returning; resigned is its Resign returning after SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

var out sync.Mutex

// emit writes one event line, stamped with the wall clock at t.
func emit(kind string, t time.Time, fields ...any) {
	out.Lock()
	defer out.Unlock()
	s := strings.TrimSuffix(fmt.Sprintln(fields...), "\n")
	fmt.Fprintf(os.Stdout, "%s %d %s\n", kind, t.UnixNano(), s)
}

func fail(format string, a ...any) {
	emit("error", time.Now(), fmt.Sprintf(format, a...))
	os.Exit(1)
}

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "etcd client endpoints, comma-separated")
	name := flag.String("name", "", "this candidate's name (the value of its election key)")
	ttl := flag.Int("ttl", 2, "session lease TTL in seconds (the server raises it to its minimum)")
	prefix := flag.String("prefix", "/vsetcd/election", "election key prefix")
	flag.Parse()
	if *name == "" || strings.ContainsAny(*name, " \n") {
		fmt.Fprintln(os.Stderr, "etcdcandidate: --name is required (no spaces)")
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fail("client: %v", err)
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(*ttl))
	if err != nil {
		fail("session: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	ttlResp, err := cli.TimeToLive(ctx, s.Lease())
	cancel()
	if err != nil {
		fail("lease time-to-live: %v", err)
	}
	emit("ready", time.Now(), *name, fmt.Sprintf("%x", int64(s.Lease())), ttlResp.GrantedTTL)

	e := concurrency.NewElection(s, *prefix)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		for resp := range e.Observe(ctx) {
			now := time.Now()
			if len(resp.Kvs) > 0 {
				emit("observe", now, string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision)
			}
		}
		select {
		case <-stopped:
		default:
			fail("observe ended")
		}
	}()
	elected := make(chan struct{})
	go func() {
		if err := e.Campaign(ctx, *name); err != nil {
			select {
			case <-stopped:
				return
			default:
				fail("campaign: %v", err)
			}
		}
		emit("elected", time.Now(), *name)
		close(elected)
	}()
	select {
	case <-s.Done():
		fail("session lost (lease expired or revoked)")
	case <-sigs:
	}
	close(stopped)
	select {
	case <-elected:
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := e.Resign(rctx)
		rcancel()
		if err != nil {
			emit("error", time.Now(), fmt.Sprintf("resign: %v", err))
		} else {
			emit("resigned", time.Now(), *name)
		}
	default:
	}
	cancel()
	s.Close() // revokes the lease: a waiting candidate's key goes too
}
