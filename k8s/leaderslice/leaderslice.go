// Package leaderslice routes a Kubernetes Service to the leader's pod only:
// the leader writes the Service's one EndpointSlice with its own address,
// fenced by its term, and a leader that steps down or stops empties it.
//
// The slice is named like the Service, labelled
// kubernetes.io/service-name=<service> (so kube-proxy and DNS use it) and
// endpointslice.kubernetes.io/managed-by=ManagedBy (so the EndpointSlice
// controllers leave it alone; the Service must have no selector). Its
// annotations record the term of the last leader that wrote it
// (AnnotationTerm, the integer fencing token, and AnnotationTermHuman,
// "epoch.slot"), the pod it names (AnnotationPod) and, when the Service
// follows a named election, that election (AnnotationElection).
//
// A Service follows one election: the node's own (the default), or a
// named one, whose leader is an app in some pod; then the slice names the
// pod whose node stands for the leading app, and the term is that
// election's fencing token. Terms of two elections are not comparable, so
// a writer never overwrites a slice that names a pod for another election:
// it takes the slice over only once that writer has emptied it (a rolling
// update that switches the election hands over as its old pods stop).
//
// Every write is a read followed by an update carrying the resourceVersion
// read (optimistic concurrency: the API server refuses it with a Conflict
// if anyone wrote in between, and the writer reads again), and a claim is
// written only if this node's term is not lower than the recorded one.
// So the recorded term never goes down, and a stale leader, whose term is
// lower, can never put its pod back. A write names one endpoint at most:
// the slice never names two pods.
//
// A release is fenced too: a writer empties the slice only if it names
// this pod at this pod's address with a term this writer wrote, so
// a zombie process with the same pod name (a force-deleted StatefulSet pod
// whose node comes back) never empties the slice of the pod's new
// incarnation. The slice has no ownerReferences: it outlives its Service,
// which keeps the recorded term (the fencing record) across a Service
// re-create, and setting them would need delete permission where the
// OwnerReferencesPermissionEnforcement admission plugin runs.
//
// The package does not import the node: it reads leadership from a channel
// of node.LeaderInfo (node.Node.Subscribe) and a func (node.Node.Leader),
// and nothing in electord imports it but cmd/electord.
package leaderslice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/electord/electord/election"

	"github.com/electord/electord/node"
)

// Names written on the slice.
const (
	// ManagedBy is the slice's endpointslice.kubernetes.io/managed-by label.
	ManagedBy = "leaderslice.electord.io"
	// AnnotationTerm is the term of the last leader that wrote the slice,
	// as a decimal uint64: the fencing token. It is kept when a leader
	// empties the slice, so it never goes down.
	AnnotationTerm = "electord.io/leader-term"
	// AnnotationTermHuman is the same term as electctl prints it (epoch.slot).
	AnnotationTermHuman = "electord.io/leader-term-human"
	// AnnotationPod is the pod the slice names ("" when empty).
	AnnotationPod = "electord.io/leader-pod"
	// AnnotationElection is the named election whose term the slice
	// records; absent for the default election.
	AnnotationElection = "electord.io/leader-election"
)

// ErrStaleTerm: the slice records a higher term than this node's; the
// writer does not write (a newer leader owns the slice).
var ErrStaleTerm = errors.New("leaderslice: the slice records a newer term")

// ErrOtherElection: the slice names a pod for another election than this
// writer's; the writer does not write until that pod's writer empties it.
var ErrOtherElection = errors.New("leaderslice: the slice names a pod for another election")

// Config configures a Writer.
type Config struct {
	Client    Client
	Namespace string
	Service   string // a Service without a selector
	PodName   string // this pod: the endpoint's targetRef
	PodIP     string // this pod's IP: the endpoint's address
	// Election is the named election the Service follows; "" for the
	// default election. Events, Current and Announced report this
	// election's leadership (node.Node.WatchElection, ElectionLeader).
	Election string
	// Events triggers the writer on leadership changes (node.Subscription.C());
	// it is closed when the node stops, which releases the slice.
	Events <-chan node.LeaderInfo
	// Current reports this node's leadership now (node.Node.Leader). The
	// writer acts on it, not on the event, and asks it again right before
	// a write that names this pod. Called from the writer's goroutine.
	Current func() node.LeaderInfo
	// Announced, optional, reports the leadership the node announced,
	// lease or not (node.Node.Status().Leader). In quorum mode a node
	// announces before its lease is held, and no event follows when the
	// lease starts: while Announced names this node in a term that
	// Current does not claim yet, the writer asks Current again every few
	// milliseconds. Without it, the writer polls only after an event that
	// named this node.
	Announced func() node.LeaderInfo
	Logger    *slog.Logger
	// Resync: how often the writer checks the slice again with no event
	// (someone deleted or changed it). Default 30s.
	Resync time.Duration
	// Backoff after a failed API call: from MinBackoff doubling to
	// MaxBackoff, with jitter. Defaults 50ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// RequestTimeout bounds one API call. Default 5s. A call in flight
	// is never cancelled by Stop (the API server could still apply it
	// after Stop's release read the slice): Stop waits for it.
	RequestTimeout time.Duration
}

// Validate names the first missing or wrong field.
func (c *Config) Validate() error {
	switch {
	case c.Client == nil:
		return errors.New("leaderslice: no Kubernetes client")
	case c.Namespace == "":
		return errors.New("leaderslice: no namespace")
	case c.Service == "":
		return errors.New("leaderslice: no Service name")
	case c.PodName == "":
		return errors.New("leaderslice: no pod name")
	case c.Events == nil || c.Current == nil:
		return errors.New("leaderslice: no leadership source (Events and Current)")
	}
	if net.ParseIP(c.PodIP) == nil {
		return fmt.Errorf("leaderslice: pod IP %q is not an IP address", c.PodIP)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Resync <= 0 {
		c.Resync = 30 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 50 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(c.MinBackoff, 5*time.Second)
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
}

// Stats counts what a Writer did.
type Stats struct {
	Claims    atomic.Uint64 // writes that named this pod
	Releases  atomic.Uint64 // writes that emptied the slice
	Conflicts atomic.Uint64 // updates refused for a stale resourceVersion (then read again)
	Stale     atomic.Uint64 // claims not written: the slice recorded a higher term, or named a pod for another election
	Errors    atomic.Uint64 // other failed API calls (retried with backoff)
}

// Snapshot is Stats read once, with whether the slice names this pod.
type Snapshot struct {
	Claims, Releases, Conflicts, Stale, Errors uint64
	// Named: the slice named this pod (at its address) when this writer
	// last read or wrote it.
	Named bool
}

// Writer keeps the Service's EndpointSlice naming the leader. Start it
// with Start, stop it with Stop.
type Writer struct {
	cfg   Config
	log   *slog.Logger
	stats Stats
	ip    string
	af    discoveryv1.AddressType

	// wrote is the term of this writer's last claim, firstWrote of its
	// first (each set before the write is sent, so a write whose answer
	// was lost counts): release empties only a slice that records a term
	// between them (a claim whose release failed, followed by a claim
	// that failed, is still this writer's). 0: never claimed.
	wrote, firstWrote atomic.Uint64
	// seen is the term the slice recorded when last read.
	seen atomic.Uint64
	// named: the slice named this pod at its address when last read or
	// written.
	named atomic.Bool
	// warnedPort: a named targetPort was logged (once).
	warnedPort bool

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Start checks cfg and starts the writer's goroutine.
func Start(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	ip := net.ParseIP(cfg.PodIP)
	w := &Writer{
		cfg:  cfg,
		log:  cfg.Logger.With("service", cfg.Namespace+"/"+cfg.Service, "pod", cfg.PodName, "election", cfg.Election),
		ip:   ip.String(),
		af:   discoveryv1.AddressTypeIPv6,
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if ip.To4() != nil {
		w.ip, w.af = ip.To4().String(), discoveryv1.AddressTypeIPv4
	}
	go w.run()
	return w, nil
}

// Stats exposes the writer's counters.
func (w *Writer) Stats() *Stats { return &w.stats }

// Snapshot reads the counters and whether the slice names this pod.
func (w *Writer) Snapshot() Snapshot {
	return Snapshot{
		Claims: w.stats.Claims.Load(), Releases: w.stats.Releases.Load(), Conflicts: w.stats.Conflicts.Load(),
		Stale: w.stats.Stale.Load(), Errors: w.stats.Errors.Load(), Named: w.named.Load(),
	}
}

// Stop stops following leadership and empties the slice if it still names
// this pod with a term this writer wrote (keeping the term), retrying
// until ctx ends; a refusal (Forbidden: the Role lacks a verb) ends it at
// once, since no retry within a shutdown's bound changes the Role, and
// retrying it only held the process up to its bound. An API call in flight is not cancelled: Stop waits for
// it (at most RequestTimeout) and then reads the slice. A writer that
// never claimed, or whose claim a higher term has replaced, makes no call.
func (w *Writer) Stop(ctx context.Context) error {
	w.stopOnce.Do(func() { close(w.stop) })
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("leaderslice: stopping %s/%s: the API call in flight did not end: %w", w.cfg.Namespace, w.cfg.Service, ctx.Err())
	}
	if wrote := w.wrote.Load(); wrote == 0 || w.seen.Load() > wrote {
		return nil // nothing this writer wrote can be in the slice
	}
	var last error // the last failure not caused by ctx's end
	for backoff := w.cfg.MinBackoff; ; backoff = min(2*backoff, w.cfg.MaxBackoff) {
		err := w.release(ctx)
		if err == nil {
			return nil
		}
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("leaderslice: releasing %s/%s: %w", w.cfg.Namespace, w.cfg.Service, err)
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("leaderslice: releasing %s/%s: %w", w.cfg.Namespace, w.cfg.Service, last)
		case <-time.After(jitter(backoff)):
		}
	}
}

func (w *Writer) run() {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	events := w.cfg.Events
	stopped := false            // the node stopped: release, then wait for Stop
	var last node.LeaderInfo    // the last event
	var confirmed election.Term // the slice named this pod in this term
	backoff := w.cfg.MinBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-w.stop:
			return
		case li, ok := <-events:
			if !ok {
				events, stopped = nil, true
			}
			last = li
			backoff = w.cfg.MinBackoff
			timer.Reset(0)
			continue
		case <-timer.C:
		}
		li := w.cfg.Current()
		ann := last
		if w.cfg.Announced != nil {
			ann = w.cfg.Announced()
		}
		if !stopped && ann.Self && !li.Self && li.Term == ann.Term && confirmed != li.Term {
			// The node says it leads but does not claim it yet (quorum
			// mode: its lease starts with the first acknowledgements, and
			// no event says so). Ask it again soon, without a call to the
			// API server; an event ends the wait. (Once the slice named
			// it in this term, a lapse seen later releases the slice.)
			timer.Reset(leaseWait)
			continue
		}
		var err error
		if li.Self && !stopped {
			err = w.claim(ctx, li.Term)
		} else {
			err = w.release(ctx)
		}
		if err == nil && li.Self && !stopped && w.stillLeads(li.Term) {
			confirmed = li.Term
		}
		switch {
		case err == nil || errors.Is(err, ErrStaleTerm) || errors.Is(err, ErrOtherElection):
			backoff = w.cfg.MinBackoff
			timer.Reset(w.cfg.Resync)
		case ctx.Err() != nil:
			return
		default:
			w.stats.Errors.Add(1)
			w.log.Warn("leader slice: API call failed; retrying", "in", backoff, "err", err)
			timer.Reset(jitter(backoff))
			backoff = min(2*backoff, w.cfg.MaxBackoff)
		}
	}
}

// leaseWait: how often the writer asks again a node that announced its
// leadership but does not claim it yet.
const leaseWait = 5 * time.Millisecond

// jitter spreads d over [d/2, d).
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// maxConflicts bounds the read-update rounds of one attempt; past it the
// attempt fails and is retried after a backoff.
const maxConflicts = 10

// claim makes the slice name this pod alone with term, unless the slice
// records a higher term (ErrStaleTerm) or this node no longer leads in
// term by the time it would write.
func (w *Writer) claim(ctx context.Context, term election.Term) error {
	svc, err := w.service(ctx)
	if err != nil {
		return err
	}
	for range maxConflicts {
		es, err := w.get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			if !w.stillLeads(term) {
				return nil
			}
			rctx, cancel, err := w.callCtx(ctx)
			if err != nil {
				return err
			}
			w.writing(term)
			_, err = w.cfg.Client.CreateEndpointSlice(rctx, w.cfg.Namespace, w.build(nil, svc, term))
			cancel()
			if apierrors.IsAlreadyExists(err) {
				w.stats.Conflicts.Add(1)
				continue
			}
			if err != nil {
				return fmt.Errorf("creating EndpointSlice %s/%s: %w", w.cfg.Namespace, w.cfg.Service, err)
			}
			w.claimed(term, 0)
			return nil
		case err != nil:
			return err
		}
		recorded, err := RecordedTerm(es)
		if err != nil {
			return err
		}
		if other := es.Annotations[AnnotationElection]; other != w.cfg.Election {
			if len(es.Endpoints) > 0 {
				w.stats.Stale.Add(1)
				w.log.Warn("leader slice: not claiming: the slice names a pod for another election; waiting until it is emptied",
					"recorded_election", other, "recorded_pod", es.Annotations[AnnotationPod])
				return fmt.Errorf("%w (%q, ours %q)", ErrOtherElection, other, w.cfg.Election)
			}
			recorded = 0 // another election's term: not comparable, and nobody is named
		}
		if uint64(term) < recorded {
			w.stats.Stale.Add(1)
			w.log.Warn("leader slice: not claiming: the slice records a newer term",
				"term", uint64(term), "term_human", term.String(), "recorded", recorded, "recorded_pod", es.Annotations[AnnotationPod])
			return fmt.Errorf("%w (ours %d, recorded %d)", ErrStaleTerm, uint64(term), recorded)
		}
		want := w.build(es, svc, term)
		if sameSlice(es, want) {
			w.writing(term) // this pod's claim in this term: ours
			return nil
		}
		if !w.stillLeads(term) {
			return nil
		}
		w.writing(term)
		err = w.update(ctx, want)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		w.claimed(term, recorded)
		return nil
	}
	return fmt.Errorf("updating EndpointSlice %s/%s: %d conflicts in a row", w.cfg.Namespace, w.cfg.Service, maxConflicts)
}

func (w *Writer) claimed(term election.Term, recorded uint64) {
	w.named.Store(true)
	w.seen.Store(uint64(term))
	w.stats.Claims.Add(1)
	w.log.Info("leader slice: names this pod", "ip", w.ip, "term", uint64(term), "term_human", term.String(), "previous_term", recorded)
}

// stillLeads asks the node again, right before a write that names this pod.
func (w *Writer) stillLeads(term election.Term) bool {
	li := w.cfg.Current()
	return li.Self && li.Term == term
}

// release empties the slice if it holds this writer's claim (ours); its
// term stays.
func (w *Writer) release(ctx context.Context) error {
	for range maxConflicts {
		es, err := w.get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !w.ours(es) {
			return nil
		}
		es = es.DeepCopy()
		es.Endpoints = nil
		if es.Annotations == nil { // someone stripped them; ours checked the term anyway
			es.Annotations = map[string]string{}
		}
		es.Annotations[AnnotationPod] = ""
		err = w.update(ctx, es)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		w.named.Store(false)
		w.stats.Releases.Add(1)
		w.log.Info("leader slice: emptied (this pod no longer leads)", "term", es.Annotations[AnnotationTerm])
		return nil
	}
	return fmt.Errorf("emptying EndpointSlice %s/%s: %d conflicts in a row", w.cfg.Namespace, w.cfg.Service, maxConflicts)
}

// names reports whether es has an endpoint for this pod at its address.
func (w *Writer) names(es *discoveryv1.EndpointSlice) bool {
	return slices.ContainsFunc(es.Endpoints, func(e discoveryv1.Endpoint) bool {
		return e.TargetRef != nil && e.TargetRef.Kind == "Pod" && e.TargetRef.Name == w.cfg.PodName &&
			slices.Contains(e.Addresses, w.ip)
	})
}

// ours reports whether es holds this writer's claim: it names this pod at
// its address and records a term this writer wrote (from its first claim
// to its last). Another process with the same pod name (a zombie, or a
// later incarnation) never matches: its address or its term differs (the
// terms of one node id's leaderships in two processes do not interleave).
func (w *Writer) ours(es *discoveryv1.EndpointSlice) bool {
	first, wrote := w.firstWrote.Load(), w.wrote.Load()
	recorded, err := RecordedTerm(es)
	return first != 0 && err == nil && first <= recorded && recorded <= wrote && w.names(es)
}

// writing records that this writer is about to write a claim in term.
func (w *Writer) writing(term election.Term) {
	w.firstWrote.CompareAndSwap(0, uint64(term))
	w.wrote.Store(uint64(term))
}
