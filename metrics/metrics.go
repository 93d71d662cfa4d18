// Package metrics exports a node's state and counters to Prometheus.
// Almost everything is read at scrape time from counters and
// snapshots the node, the transport, the peer server and the API keep
// anyway (Collector), so the node's loop does no extra work per message;
// only durations are observed as they happen (Observer, a node.Observer).
// docs/OPERATIONS.md lists every metric and what to alert on.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/electord/electord/election"
	"github.com/electord/electord/node"
	"github.com/electord/electord/security/handshake"
	"github.com/electord/electord/transport"
	"github.com/electord/electord/transport/lf"
)

// Namespace prefixes every electord metric.
const Namespace = "electord"

// Sources are what the collector reads at scrape time. Node is required;
// a nil func leaves its metrics out.
type Sources struct {
	Node *node.Node
	// Client is the outbound transport's counters.
	Client func() transport.ClientStats
	// PeerService is the inbound peer service's counters.
	PeerService func() transport.ServerStats
	// Pool is the Leader/Followers peer server's gauges (nil: the peer
	// server is grpc-go).
	Pool func() lf.Stats
	// API counts the client API's calls, watches and connections.
	API *API
	// APIDenied counts API calls refused for their identity or role.
	APIDenied func() uint64
	// GossipHealth is memberlist's awareness score (0 is healthy).
	GossipHealth func() int
	// Handshakes are the TLS handshakes the node's listeners refused.
	Handshakes *handshake.Refusals
	// GossipProofs are the failed proofs of an id (claims refused) and the
	// nodes alive in gossip that are no members for want of a proof (peer
	// TLS on; see membership's proofs.go).
	GossipProofs func() (refused uint64, unproven int)
}

// Registry returns a registry with electord's metrics for s, Go's runtime
// and the process's, and installs the duration histograms as the node's
// observer.
func Registry(s Sources) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	obs := NewObserver()
	s.Node.SetObserver(obs)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{s: s}, obs)
	if s.API != nil {
		reg.MustRegister(s.API)
	}
	return reg
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

var (
	roleDesc           = desc("role", "1 for this node's role (leader, follower, electing, no_leader), 0 for the others.", "role")
	leaderTermDesc     = desc("leader_term", "The term of the leadership this node knows (the integer fencing token; kept when no leader is known).")
	leaderEpochDesc    = desc("leader_term_epoch", "The epoch of leader_term (the term is epoch<<16 | the leader's slot).")
	highestTermDesc    = desc("highest_term", "The highest term this node has seen, election attempts included (durable: the term file reserves epochs ahead of it).")
	leaderIDDesc       = desc("leader_id", "The id of the leader this node knows, 0 when none.")
	leaderChangesDesc  = desc("leader_changes_total", "Leadership changes this node saw (a new leader, a new term or no leader).")
	electionsDesc      = desc("elections_started_total", "Elections this node took part in (its role became electing, or it took leadership).")
	electionsWonDesc   = desc("elections_won_total", "Elections this node won.")
	electionsLostDesc  = desc("elections_lost_total", "Elections this node took part in that ended with another leader or none.")
	detectionsDesc     = desc("leader_failures_detected_total", "Times this node, following a leader, found it gone (timeout, refused connection, failed send, gossip) and stopped following it.")
	sentDesc           = desc("messages_sent_total", "Peer messages delivered, by type.", "type")
	sendFailedDesc     = desc("messages_send_failed_total", "Peer messages that could not be delivered, by type.", "type")
	receivedDesc       = desc("messages_received_total", "Peer messages handed to the node, by type: those the peer port accepted, and the answers to this node's heartbeats.", "type")
	refusedDesc        = desc("messages_refused_total", "Peer messages refused, by type (unknown when refused before decoding) and reason.", "type", "reason")
	persistErrorsDesc  = desc("term_persist_failures_total", "Writes of the term to the data dir that failed (the node takes no part in elections until one succeeds).")
	persistFaultDesc   = desc("term_persist_fault", "1 while the node cannot persist its term, else 0.")
	killedDesc         = desc("killed", "1 while the node is killed (electctl kill) or stood down after a membership conflict.")
	standingDesc       = desc("standing", "1 while this node is a candidate in the default election; 0 while its candidate probe fails (it follows, never leads).")
	probeOKDesc        = desc("candidate_probe_ok", "1 while the candidate probe (candidate-probe) passes, 0 while it fails; absent without a probe.")
	membersDesc        = desc("gossip_members", "Members this node knows, itself included, by state: alive, or dead (declared dead or left).", "state")
	gossipHealthDesc   = desc("gossip_health_score", "memberlist's awareness score: 0 is healthy; it rises when this node's own probes time out (it may be the slow one).")
	conflictsDesc      = desc("gossip_conflicts_total", "Duplicate ids or term-slot collisions seen in gossip.")
	unprovenDesc       = desc("gossip_unproven_claims_total", "Claims in gossip refused because the claimant could not prove its id with a mutual TLS handshake on the peer address it gossips (peer TLS on): a node that is not let in as a member, a term slot, this node's own id.")
	unprovenNowDesc    = desc("gossip_unproven_members", "Nodes alive in gossip that are not members because they have not proved their id (peer TLS on): pending or refused proofs.")
	inboxFullDesc      = desc("inbox_full_total", "Peer messages refused because the node's inbox was full.")
	failuresLostDesc   = desc("send_failures_unreported_total", "Send failures not reported to the state machine (queue full; timeouts recover them).")
	droppedEventsDesc  = desc("watch_events_dropped_total", "Leadership events lost by slow watchers.")
	poolDesc           = desc("peer_pool_goroutines", "The Leader/Followers peer server's goroutines by activity: polling (waiting on epoll, 0 or 1), handling (serving an event), standby (waiting to poll), live (all).", "activity")
	poolNoStandbyDesc  = desc("peer_pool_no_standby_total", "Times the L/F pool's poller took an event while no goroutine was on standby to poll in its place (the pool was saturated).")
	poolPromotionsDesc = desc("peer_pool_promotions_total", "Standby goroutines of the L/F pool woken to poll (promotions).")
	poolEventsDesc     = desc("peer_pool_events_total", "Events the L/F pool's epoll returned.")
	poolCallsDesc      = desc("peer_pool_calls_total", "Calls the L/F pool ran, by outcome (ok, error, panic).", "outcome")
	poolBufferedDesc   = desc("peer_pool_buffered_bytes", "Request bytes the L/F pool's connections hold.")
	connsDesc          = desc("connections", "Open connections, by listener (peer, api, http).", "listener")
	connsTotalDesc     = desc("connections_accepted_total", "Connections accepted, by listener.", "listener")
	connsRefusedDesc   = desc("connections_refused_total", "Connections closed at once because the listener's max-conns were open, by listener.", "listener")
	apiDeniedDesc      = desc("api_denied_total", "API calls refused for the caller's identity or role (TLS).")
	handshakesDesc     = desc("tls_handshakes_refused_total", "TLS handshakes refused, by listener (peer, api, http; those serving TLS) and reason (docs/OPERATIONS.md).", "listener", "reason")
)

type collector struct{ s Sources }

// Describe sends the descriptions of what Collect sends.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter[T uint64 | int](d *prometheus.Desc, v T, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

// Roles are the values of electord_role's label.
var Roles = []string{node.StateLeader, node.StateFollower, node.StateElecting, node.StateNoLeader}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	n := c.s.Node
	st := n.Status()
	li := n.Leader()
	for _, r := range Roles {
		v := 0.0
		if li.State == r {
			v = 1
		}
		ch <- gauge(roleDesc, v, r)
	}
	ch <- gauge(leaderTermDesc, float64(li.Term))
	ch <- gauge(leaderEpochDesc, float64(li.Term.Epoch()))
	ch <- gauge(highestTermDesc, float64(st.Term))
	ch <- gauge(leaderIDDesc, float64(li.ID))
	ctr := n.Counters()
	ch <- counter(leaderChangesDesc, ctr.LeaderChanges.Load())
	ec := n.ElectionCounts()
	ch <- counter(electionsDesc, ec.Started)
	ch <- counter(electionsWonDesc, ec.Won)
	ch <- counter(electionsLostDesc, ec.Lost)
	ch <- counter(detectionsDesc, ec.Detections)
	ch <- counter(persistErrorsDesc, ctr.PersistErrors.Load())
	ch <- gauge(persistFaultDesc, boolf(st.Fault != ""))
	ch <- gauge(killedDesc, boolf(st.Killed))
	ch <- gauge(standingDesc, boolf(st.Standing))
	if st.CandidateProbe != nil {
		ch <- gauge(probeOKDesc, boolf(st.CandidateProbe.OK))
	}
	ch <- counter(conflictsDesc, ctr.Conflicts.Load())
	ch <- counter(inboxFullDesc, ctr.InboxFull.Load())
	ch <- counter(failuresLostDesc, ctr.FailuresLost.Load())
	ch <- counter(droppedEventsDesc, n.DroppedEvents())
	c.collectNamed(ch)
	alive, dead := 0, 0
	for _, m := range st.Members {
		if m.Alive {
			alive++
		} else {
			dead++
		}
	}
	ch <- gauge(membersDesc, float64(alive), "alive")
	ch <- gauge(membersDesc, float64(dead), "dead")
	if c.s.GossipHealth != nil {
		ch <- gauge(gossipHealthDesc, float64(c.s.GossipHealth()))
	}
	if c.s.GossipProofs != nil {
		refused, unproven := c.s.GossipProofs()
		ch <- counter(unprovenDesc, refused)
		ch <- gauge(unprovenNowDesc, float64(unproven))
	}

	// Heartbeat answers come back on the call that carried the heartbeat
	// (the transport's replies); every other message through the peer port.
	received := map[election.MsgType]uint64{}
	refused := map[[2]string]uint64{}
	if c.s.Client != nil {
		cs := c.s.Client()
		for t := election.MsgElection; t <= election.LastMsgType; t++ {
			ch <- counter(sentDesc, cs.Sent[t], t.String())
			ch <- counter(sendFailedDesc, cs.Failed[t], t.String())
		}
		received[election.MsgHeartbeatResp] += cs.Replies
		refused[[2]string{election.MsgHeartbeatResp.String(), "reply_dropped"}] += cs.RepliesDropped
	}
	if c.s.PeerService != nil {
		ss := c.s.PeerService()
		for t, v := range ss.Received {
			received[t] += v
		}
		for t := election.MsgElection; t <= election.LastMsgType; t++ {
			ch <- counter(receivedDesc, received[t], t.String())
		}
		for reason, v := range map[string]uint64{"malformed": ss.RejectedInvalid, "not_serving": ss.RejectedNotServing,
			"overloaded": ss.RejectedOverloaded, "identity": ss.RejectedIdentity, "other": ss.RejectedOther,
			"buffer_budget": ss.RejectedBudget, "not_ready": ss.RejectedNotReady} {
			refused[[2]string{"unknown", reason}] += v
		}
	}
	for _, r := range n.RefusedMessages() {
		typ := "unknown"
		if r.Type.Valid() {
			typ = r.Type.String()
		}
		refused[[2]string{typ, r.Reason}] += r.Count
	}
	for k, v := range refused {
		ch <- counter(refusedDesc, v, k[0], k[1])
	}

	if c.s.Pool != nil {
		ps := c.s.Pool()
		ch <- gauge(poolDesc, float64(ps.Polling), "polling")
		ch <- gauge(poolDesc, float64(ps.Handling), "handling")
		ch <- gauge(poolDesc, float64(ps.Standby), "standby")
		ch <- gauge(poolDesc, float64(ps.Live), "live")
		ch <- counter(poolNoStandbyDesc, ps.NoStandby)
		ch <- counter(poolPromotionsDesc, ps.Promotions)
		ch <- counter(poolEventsDesc, ps.Events)
		ch <- counter(poolCallsDesc, ps.Calls-ps.HandlerErrors-ps.HandlerPanics, "ok")
		ch <- counter(poolCallsDesc, ps.HandlerErrors, "error")
		ch <- counter(poolCallsDesc, ps.HandlerPanics, "panic")
		ch <- gauge(poolBufferedDesc, float64(ps.Buffered))
		ch <- gauge(connsDesc, float64(ps.Conns), "peer")
		ch <- counter(connsTotalDesc, ps.Accepts, "peer")
		ch <- counter(connsRefusedDesc, ps.RefusedConns, "peer")
	}
	if c.s.API != nil {
		for _, l := range c.s.API.listeners() {
			if l.name == "peer" && c.s.Pool != nil {
				continue
			}
			ch <- gauge(connsDesc, float64(l.open.Load()), l.name)
			ch <- counter(connsTotalDesc, l.accepted.Load(), l.name)
		}
	}
	if c.s.APIDenied != nil {
		ch <- counter(apiDeniedDesc, c.s.APIDenied())
	}
	if c.s.Handshakes != nil {
		for _, n := range c.s.Handshakes.Counts() {
			ch <- counter(handshakesDesc, n.N, n.Listener, n.Reason.String())
		}
	}
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Observer is the node.Observer that feeds the duration histograms.
type Observer struct {
	detection *prometheus.HistogramVec
	election  *prometheus.HistogramVec
	persist   *prometheus.HistogramVec
	// failover: named elections' failovers, all elections in one
	// histogram (no label per election).
	failover prometheus.Histogram
}

var (
	_ node.Observer      = (*Observer)(nil)
	_ node.NamedObserver = (*Observer)(nil)
)

// Buckets for durations that run from a millisecond to seconds.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// NewObserver returns the histograms, empty.
func NewObserver() *Observer {
	h := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	}
	return &Observer{
		detection: h("failure_detection_seconds", "From the last message this node got from the leader it followed to the start of the election it began on finding the leader gone.", durationBuckets),
		election:  h("election_duration_seconds", "How long the elections this node took part in took, by outcome (won, lost: another leader, none: no leader).", durationBuckets, "outcome"),
		persist: h("term_persist_seconds", "How long writing the term to the data dir took (write and fsync), by result (ok, error).",
			[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}, "result"),
		failover: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "named_failover_seconds",
			Help:    "Named elections' failovers as this node shows them: how long it showed no leader between a leadership and the next (0 when it went straight from one to the next), all elections together; its count is the failovers.",
			Buckets: durationBuckets}),
	}
}

func (o *Observer) NamedFailover(d time.Duration) { o.failover.Observe(d.Seconds()) }

func (o *Observer) ElectionEnded(r node.ElectionRecord) {
	outcome := "lost"
	switch {
	case r.Won:
		outcome = "won"
	case r.Leader == 0:
		outcome = "none"
	}
	o.election.WithLabelValues(outcome).Observe(r.Duration().Seconds())
}

func (o *Observer) FailureDetected(d time.Duration) {
	o.detection.WithLabelValues().Observe(d.Seconds())
}

func (o *Observer) TermSaved(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	o.persist.WithLabelValues(result).Observe(d.Seconds())
}

func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.detection.Describe(ch)
	o.election.Describe(ch)
	o.persist.Describe(ch)
	o.failover.Describe(ch)
}

func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.detection.Collect(ch)
	o.election.Collect(ch)
	o.persist.Collect(ch)
	o.failover.Collect(ch)
}
