package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// shardCandMain is `vsetcd shardcand`: one candidate process, ONE session
// (one lease), a campaign in every election. A campaign is
// concurrency.Election.Campaign's own steps, split so that the window can
// count them: register (the put-if-absent transaction of its key under the
// session's lease, then the Get of the key just below it) counts against
// the window, and so does the Get after each wake-up; the wait itself (a
// watch of the key below) does not, since it costs the member no work
// until it is woken.
//
// Lines on stdout: "ready <retries> <halvings> <window>" once every
// campaign is registered; "won <election> <unix ns>" when a campaign ends
// with this candidate leading; "lost <unix ns>" if the session's lease
// expired (the candidate then exits: an application would start over with
// a new session, which for a benchmark would hide the failure).
func shardCandMain(args []string) error {
	fs := flag.NewFlagSet("shardcand", flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "etcd client endpoint")
	name := fs.String("name", "", "this candidate's value")
	n := fs.Int("elections", 10000, "elections to campaign in")
	ttl := fs.Int("ttl", 10, "session TTL, seconds")
	inflight := fs.Int("inflight", 64, "campaigns registering at once, at most (halved on too-many-requests)")
	fs.Parse(args)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallRecvMsgSize: 256 << 20})
	if err != nil {
		return err
	}
	var sess *concurrency.Session
	for attempt := 0; ; attempt++ {
		if sess, err = concurrency.NewSession(cli, concurrency.WithTTL(*ttl)); err == nil {
			break
		}
		if !overloaded(err) || attempt > 20 {
			return err
		}
		time.Sleep(backoff(attempt, rand.Float64()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out sync.Mutex
	say := func(f string, a ...any) {
		out.Lock()
		fmt.Printf(f+"\n", a...)
		out.Unlock()
	}
	go func() {
		<-sess.Done()
		if ctx.Err() == nil {
			say("lost %d", time.Now().UnixNano())
			os.Exit(3)
		}
	}()
	// SIGTERM (the harness ending the run) may come while campaigns are
	// still registering: close the session (revoking the lease) and exit.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		sess.Close()
		cli.Close()
		os.Exit(0)
	}()
	w := newWindow(1, *inflight)
	var retries atomic.Int64
	var registered sync.WaitGroup
	for i := range *n {
		el := shardName(i, *n)
		registered.Add(1)
		w.acquire()
		go func() {
			err := campaign(ctx, sess, shardsPrefix+el+"/", *name, w, &retries, registered.Done)
			if err == nil {
				say("won %s %d", el, time.Now().UnixNano())
			} else if ctx.Err() == nil {
				say("error %s: %v", el, err)
			}
		}()
	}
	registered.Wait()
	cur, cuts := w.size()
	say("ready %d %d %d", retries.Load(), cuts, cur)
	select {}
}

// campaign is Election.Campaign(ctx, val) on pfx (which ends in "/"), with
// the caller's window slot held until the campaign is registered: its key
// written and the key below it read (then registered is called and the
// slot released). A request the member refuses or that fails is retried
// after a backoff, in a new slot; the put is the same transaction as
// Campaign's, so a retry after a put that did land finds the key and keeps
// its revision. Returns nil when this candidate leads.
func campaign(ctx context.Context, s *concurrency.Session, pfx, val string, w *window, retries *atomic.Int64, registered func()) error {
	cli := s.Client()
	k := fmt.Sprintf("%s%x", pfx, s.Lease())
	var rev, maxRev int64
	var below string
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			retries.Add(1)
			time.Sleep(backoff(attempt-1, rand.Float64()))
			w.acquire()
		}
		if ctx.Err() != nil {
			w.release(false)
			registered()
			return ctx.Err()
		}
		if rev == 0 {
			r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, val, clientv3.WithLease(s.Lease()))).Else(clientv3.OpGet(k)).Commit()
			if err != nil {
				w.release(overloaded(err))
				continue
			}
			rev = r.Header.Revision
			if !r.Succeeded {
				rev = r.Responses[0].GetResponseRange().Kvs[0].CreateRevision
			}
		}
		g, err := cli.Get(ctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		if err != nil {
			w.release(overloaded(err))
			continue
		}
		w.release(false)
		registered()
		if len(g.Kvs) == 0 {
			return nil
		}
		below, maxRev = string(g.Kvs[0].Key), g.Header.Revision
		break
	}
	// Waiting, as concurrency's waitDeletes: watch the key just below from
	// the Get's revision until it is deleted, then look for the next one.
	for attempt := 0; ; {
		err := waitDeleted(ctx, cli, below, maxRev)
		if err == nil {
			// The Get after a wake-up counts against the window too: when
			// a candidate with thousands of leaderships dies, its lease's
			// expiry wakes as many campaigns at once, and their Gets
			// unbounded starved the survivors' keep-alives.
			var g *clientv3.GetResponse
			w.acquire()
			g, err = cli.Get(ctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
			w.release(overloaded(err))
			if err == nil {
				if len(g.Kvs) == 0 {
					return nil
				}
				below, maxRev, attempt = string(g.Kvs[0].Key), g.Header.Revision, 0
				continue
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		retries.Add(1)
		time.Sleep(backoff(attempt, rand.Float64()))
		attempt++
	}
}

// waitDeleted returns nil once key is deleted at or after revision rev.
func waitDeleted(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wr clientv3.WatchResponse
	for wr = range cli.Watch(cctx, key, clientv3.WithRev(rev)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := wr.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("watch of %s ended", key)
}
