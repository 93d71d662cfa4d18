package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Membership is one node's gossip membership.
type Membership struct {
	cfg      Config
	name     string // memberlist node name: the decimal id
	since    int64  // when this node's gossip started, Unix ns
	log      *slog.Logger
	list     *memberlist.Memberlist
	local    string // advertised host:port
	bound    string // bound host:port
	deadTime time.Duration
	q        *eventQueue
	// stopRetry is closed by Shutdown: it stops RetryJoin.
	stopRetry chan struct{}

	metaMu  sync.Mutex
	meta    Meta
	leaving bool

	// metas decodes the other nodes' metadata (see metaCache).
	metas metaCache

	// mu guards the view of the other nodes. memberlist calls the delegate
	// with its own node lock held, so nothing under mu calls memberlist.
	mu        sync.Mutex
	members   map[string]*member // live remote nodes by gossip name
	conflicts map[string]time.Time
	// known is every remote node ever seen alive, by gossip name, with its
	// last gossip address: RetryJoin joins those missing from members.
	known map[string]*knownMember

	refusedSettings atomic.Uint64 // see RefusedSettings
	refusedClaims   atomic.Uint64 // see RefusedClaims
	// Proofs (proofs.go), under mu: the queue, the goroutines working it,
	// and the back-off bounds (proofRetryMin, proofRetryMax).
	proofQueue                   []proofJob
	proofWorkers                 int
	proofRetryMin, proofRetryMax time.Duration
	// syncOwed: Synced waits for the proofs under way (synced.go).
	syncOwed bool

	// closing is set when Leave or Shutdown begins: memberlist's warnings
	// and errors are debug from then on (see memberlistLogger).
	closing atomic.Bool
	// refutes counts this node's refutations of reports that it is dead or
	// suspect (see sync).
	refutes atomic.Uint64
	// formed: this node has seen Config.BootstrapExpect live members once
	// (see short).
	formed   atomic.Bool
	life     sync.Mutex // serializes Join/Leave/Shutdown against Shutdown
	left     bool
	shutdown bool
}

// member is a live remote node as this node sees it.
type member struct {
	name     string
	addr     string // gossip host:port
	valid    bool   // its metadata decoded
	meta     Meta
	since    int64
	leaving  bool
	admitted bool // reported by Join and listed by Members
	shown    Meta // while admitted: the metadata Join or Update last reported
	badNoted bool // an undecodable update was reported
	// With Config.Prove (proofs.go): where the proof of its current claim
	// stands, the last claim it proved, and its failed proofs in a row.
	proof    proofState
	proofOf  claim
	failures int
}

// New starts gossip on cfg.BindAddr. It contacts no one: call Join.
func New(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	preset, err := PresetNamed(cfg.Preset)
	if err != nil {
		return nil, fmt.Errorf("gossip-preset: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Membership{
		cfg:       cfg,
		name:      strconv.FormatUint(uint64(cfg.Self.ID), 10),
		since:     cmp.Or(cfg.since, time.Now().UnixNano()),
		log:       logger.With("component", "membership"),
		meta:      cfg.Self,
		members:   make(map[string]*member),
		conflicts: make(map[string]time.Time),
		known:     make(map[string]*knownMember),
		stopRetry: make(chan struct{}),

		proofRetryMin: proofRetryMin,
		proofRetryMax: proofRetryMax,
	}
	m.cfg.Join = slices.Clone(cfg.Join)

	mc := memberlist.DefaultLANConfig()
	if err := preset.apply(mc); err != nil {
		return nil, err
	}
	m.deadTime = mc.GossipToTheDeadTime
	// No compression: memberlist runs every packet it sends (each probe
	// and ack too) through a fresh LZW writer, keeping the result when it
	// is smaller, and every push/pull stream; at 128 processes on 2 cores
	// that was about 8% of all CPU. Gossip stays on one network and its
	// packets are small. A node that compresses is still understood:
	// memberlist decodes compressed messages whatever this says
	// (TestGossipIsUncompressedAndUnderstandsCompressed).
	mc.EnableCompression = cfg.compress
	host, port, _ := splitBind(cfg.BindAddr)
	mc.Name = m.name
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, port, port
	if cfg.AdvertiseAddr != "" {
		ahost, aport, _ := splitAdvertise(cfg.AdvertiseAddr)
		ip, err := resolveOne(ahost)
		if err != nil {
			return nil, fmt.Errorf("advertise-host: %v", err)
		}
		mc.AdvertiseAddr = ip
		if aport != 0 {
			mc.AdvertisePort = aport // ignored by memberlist if port is 0
		}
	}
	mc.Label = cfg.Label
	var ring *memberlist.Keyring
	if cfg.KeyFile != "" {
		keys, err := ReadKeyFile(cfg.KeyFile)
		if err != nil {
			return nil, err
		}
		if ring, err = memberlist.NewKeyring(keys, keys[0]); err != nil {
			return nil, fmt.Errorf("gossip-key-file %s: %w", cfg.KeyFile, err)
		}
		mc.Keyring = ring
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	d := delegate{m}
	mc.Delegate, mc.Events, mc.Conflict, mc.Alive, mc.Merge = d, d, d, d, d
	mc.Logger, mc.LogOutput = memberlistLogger(logger, &m.closing, &m.refutes), nil

	if cfg.wrapTransport != nil {
		if err := wrapNetTransport(mc, cfg.wrapTransport); err != nil {
			return nil, fmt.Errorf("gossip-addr %s: %w", cfg.BindAddr, err)
		}
	}
	m.q = newEventQueue()
	list, err := memberlist.Create(mc)
	if err != nil {
		m.q.close()
		return nil, fmt.Errorf("gossip-addr %s: %w", cfg.BindAddr, err)
	}
	m.list = list
	// Create replaced port 0 with the port it bound.
	m.bound = net.JoinHostPort(host, strconv.Itoa(mc.BindPort))
	m.local = list.LocalNode().Address()
	m.log.Info("gossip started", "id", m.name, "addr", m.local, "bind", m.bound, "preset", preset.Name,
		"encrypted", ring != nil, "label", cfg.Label)
	if ring != nil {
		go m.watchKeys(ring, cmp.Or(cfg.KeyPoll, DefaultKeyPoll))
	}
	return m, nil
}

// resolveOne returns host as an IP address, resolving a name (IPv4 first).
func resolveOne(host string) (string, error) {
	if net.ParseIP(host) != nil {
		return host, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", err
	}
	for _, ip := range ips {
		if ip.IP.To4() != nil {
			return ip.IP.String(), nil
		}
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("%s has no address", host)
	}
	return ips[0].IP.String(), nil
}

// LocalAddr is this node's gossip host:port as the others reach it (with
// port 0 resolved to the port picked).
func (m *Membership) LocalAddr() string { return m.local }

// BoundAddr is the host:port the gossip sockets are bound to; it differs
// from LocalAddr when bound to every interface or advertising another host.
func (m *Membership) BoundAddr() string { return m.bound }

// Events reports changes of the other nodes, in order, and is closed by
// Shutdown. memberlist never waits for the reader: events queue without
// bound until read.
func (m *Membership) Events() <-chan Event { return m.q.out }

// Join contacts seeds (Config.Join when seeds is empty). See JoinContext.
func (m *Membership) Join(seeds []string) (int, error) {
	return m.JoinContext(context.Background(), seeds)
}

// JoinContext contacts seeds (Config.Join when seeds is empty) and syncs
// state with each. A seed is "host:port" or a DNS name with or without a port
// (DefaultGossipPort): a name is resolved here, to every A and AAAA record,
// and every address is tried, in parallel. (memberlist's own resolution would
// default the port to this node's bind port and, for a dotted name, first
// trust a TCP ANY query to the first resolv.conf server.) This node's own
// address is skipped.
//
// It returns how many addresses answered. The error is nil if any answered,
// or if there was nothing to contact (no seeds, or only this node: the first
// node of a cluster); otherwise it lists every failure.
func (m *Membership) JoinContext(ctx context.Context, seeds []string) (int, error) {
	if len(seeds) == 0 {
		seeds = m.cfg.Join
	}
	m.life.Lock()
	defer m.life.Unlock()
	if m.shutdown || m.left {
		return 0, errors.New("membership: join after leave or shutdown")
	}
	var errs []error
	var addrs []string
	for _, s := range seeds {
		as, err := m.resolveSeed(ctx, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("join %q: %w", s, err))
			continue
		}
		for _, a := range as {
			if a != m.local && a != m.bound && !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		return 0, errors.Join(errs...)
	}

	type result struct {
		addr string
		err  error
	}
	results := make(chan result, len(addrs))
	for _, a := range addrs {
		go func() {
			results <- result{a, m.sync(ctx, a)}
		}()
	}
	joined := 0
	for range addrs {
		select {
		case r := <-results:
			if r.err != nil {
				errs = append(errs, fmt.Errorf("join %s: %w", r.addr, r.err))
				m.log.Debug("seed did not answer", "addr", r.addr, "err", r.err)
				continue
			}
			joined++
		case <-ctx.Done():
			// The attempts left end within TCPTimeout on their own.
			if joined > 0 {
				return joined, nil
			}
			return 0, errors.Join(append(errs, ctx.Err())...)
		}
	}
	m.log.Info("joined gossip", "contacted", joined, "tried", len(addrs))
	if joined > 0 {
		return joined, nil
	}
	return 0, errors.Join(errs...)
}

// sync exchanges full state with the node at addr (memberlist's push/pull
// over TCP), as a join does. If this node had to refute a report of its own
// death while merging the answer (it restarted after a leave, or was on the
// far side of a partition), addr still holds that report: it ignored this
// node's state at the old incarnation, and the refutation spreads only by
// gossip, which a node that dropped this one does not send to it (its
// rejoin loop backs off, seconds). Meanwhile addr refuses this node's
// messages as from a non-member. So sync then exchanges once more, carrying
// the new incarnation at once, unless ctx is done by then.
func (m *Membership) sync(ctx context.Context, addr string) error {
	before := m.refutes.Load()
	if _, err := m.list.Join([]string{addr}); err != nil {
		return err
	}
	if m.refutes.Load() != before && ctx.Err() == nil {
		if _, err := m.list.Join([]string{addr}); err != nil {
			m.log.Debug("second state sync after a refutation failed", "addr", addr, "err", err)
		}
	}
	return nil
}

// resolveSeed turns one seed into ip:port strings.
func (m *Membership) resolveSeed(ctx context.Context, seed string) ([]string, error) {
	host, port, err := splitSeed(seed)
	if err != nil {
		return nil, err
	}
	p := strconv.Itoa(port)
	if net.ParseIP(host) != nil {
		return []string{net.JoinHostPort(host, p)}, nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip.IP.String(), p))
	}
	m.log.Debug("resolved seed", "seed", seed, "addrs", out)
	return out, nil
}

// Members lists the live members, this node included, by id. A node whose
// metadata cannot be decoded, or that lost its term slot to another (see
// the package comment), is not listed.
func (m *Membership) Members() []Meta {
	m.metaMu.Lock()
	out := []Meta{m.meta}
	m.metaMu.Unlock()
	m.mu.Lock()
	for _, mb := range m.members {
		if mb.admitted {
			out = append(out, mb.shown)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Meta) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// SetMeta changes what this node gossips about itself (not its id); the
// others see an Update. It waits up to timeout for the change to be sent.
func (m *Membership) SetMeta(meta Meta, timeout time.Duration) error {
	if meta.ID != m.cfg.Self.ID {
		return fmt.Errorf("membership: the id cannot change (%d to %d)", m.cfg.Self.ID, meta.ID)
	}
	if n := metaSize(meta, m.cfg.Settings); n > memberlist.MetaMaxSize {
		return fmt.Errorf("membership: metadata is %d bytes as JSON, more than the %d gossip carries", n, memberlist.MetaMaxSize)
	}
	m.life.Lock()
	defer m.life.Unlock()
	if m.shutdown || m.left {
		return errors.New("membership: SetMeta after leave or shutdown")
	}
	m.metaMu.Lock()
	m.meta = meta
	m.metaMu.Unlock()
	return m.list.UpdateNode(timeout)
}

// Leave tells the others that this node leaves, so that they report Leave
// rather than Dead, and waits up to timeout for it to be sent. Gossip keeps
// running until Shutdown, but the node cannot join again: start a new
// Membership. Leave after Shutdown is an error.
func (m *Membership) Leave(timeout time.Duration) error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.shutdown {
		return errors.New("membership: leave after shutdown")
	}
	if m.left {
		return nil
	}
	m.left = true
	m.closing.Store(true)
	deadline := time.Now().Add(timeout)
	// First gossip "leaving" in the metadata, and let it spread (memberlist
	// would drop it from its send queue once the leave is queued), then
	// leave. Half the time for each step, or what the first leaves.
	m.metaMu.Lock()
	m.leaving = true
	m.metaMu.Unlock()
	if err := m.list.UpdateNode(timeout / 2); err != nil {
		m.log.Debug("leave intent not fully sent", "err", err)
	}
	rest := time.Until(deadline)
	if rest <= 0 {
		rest = time.Millisecond
	}
	if err := m.list.Leave(rest); err != nil {
		if strings.Contains(err.Error(), "timeout waiting for leave broadcast") {
			// No member confirmed in time (the last node of a cluster, or
			// every other one leaving too): they see this node dead instead.
			m.log.Info("left gossip; no member confirmed the leave in time", "id", m.name, "waited", timeout)
			return nil
		}
		return fmt.Errorf("membership: leave: %w", err)
	}
	m.log.Info("left gossip", "id", m.name)
	return nil
}

// Shutdown stops gossip and closes Events; events not yet read are
// discarded. Without Leave first, the others report this node Dead once
// their probes fail. It is safe to call more than once.
func (m *Membership) Shutdown() error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.shutdown {
		return nil
	}
	m.shutdown = true
	m.closing.Store(true)
	close(m.stopRetry)
	err := m.list.Shutdown()
	m.q.close()
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}
