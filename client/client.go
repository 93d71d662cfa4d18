// Package client is the Go client of electord's Elector API: ask who leads,
// watch leadership change, inspect members and send operator commands.
//
// A Client is given several endpoints (api addresses of electord nodes).
// Every call goes to the first endpoint that answers, trying them in order;
// an endpoint that cannot be reached is skipped, but an endpoint that
// answers with an error (for example NotFound) is final: the error is
// returned and no other endpoint is asked.
//
// Errors are gRPC status errors: use status.Code(err). When no endpoint
// answers, the error is a *NoEndpointError whose code is Unavailable (or
// DeadlineExceeded/Canceled when the context ended first).
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	electordv1 "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security"
)

// NodeID names a node (election.NodeID).
type NodeID = election.NodeID

// Term is a leadership's fencing token (election.Term): a uint64 on the
// wire and in JSON, for programs (compare and store uint64(t)), printed
// for people as "epoch.slot" (t.String(), "%v": "21.5", the election epoch
// and the leader's slot). electctl, the sidecar and the logs write both,
// labelled: "term 21.5 (fencing token 1376261)", "term_epoch_slot".
type Term = election.Term

// Leader states (LeaderInfo.State): the answering node's state.
const (
	StateLeader   = "leader"
	StateFollower = "follower"
	StateElecting = "electing"
	StateNoLeader = "no_leader"
)

// LeaderInfo is who leads, as the answering node sees it. Its JSON is the
// sidecar's GET /leader answer.
type LeaderInfo struct {
	ID      NodeID    `json:"id"`      // 0: no leader known
	Name    string    `json:"name"`    // the leader's name
	Address string    `json:"address"` // the leader's api address
	Term    Term      `json:"term"`    // the leadership's term
	Since   time.Time `json:"since"`   // when the answering node learned of it (zero if unknown)
	Self    bool      `json:"self"`    // the answering node leads
	State   string    `json:"state"`   // the answering node's state
}

// HasLeader reports whether a leader is known.
func (l LeaderInfo) HasLeader() bool { return l.ID != 0 }

// Member is one cluster member as the answering node knows it.
type Member struct {
	ID        NodeID `json:"id"`
	Name      string `json:"name"`
	Priority  int64  `json:"priority"`
	PeerAddr  string `json:"peer_address"`
	APIAddr   string `json:"api_address"`
	Alive     bool   `json:"alive"`
	Role      string `json:"role"` // leader, follower, or "" when unknown
	Term      Term   `json:"term"`
	Algorithm string `json:"algorithm"`
}

// Status is the answering node's view of the cluster.
type Status struct {
	Self      NodeID     `json:"self_id"`
	Algorithm string     `json:"algorithm"`
	Leader    LeaderInfo `json:"leader"`
	Members   []Member   `json:"members"`
}

// CommandResult is the answer to Kill, Revive, Resign and Transfer.
type CommandResult struct {
	Message string     `json:"message"` // what was done
	Leader  LeaderInfo `json:"leader"`  // the acting node's view afterwards
}

// Defaults of the options.
const (
	// DefaultDialTimeout bounds how long one endpoint may take to connect
	// before the next one is tried.
	DefaultDialTimeout = 2 * time.Second
	// DefaultBackoffMin and DefaultBackoffMax bound the wait of Watch
	// between passes over endpoints that all failed (doubling, jittered).
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 5 * time.Second
	// DefaultKeepalive is how often an open connection with a stream is
	// pinged, so Watch notices a server that vanished without closing its
	// connections. api.NewGRPCServer allows pings this often; a server
	// with grpc-go's default policy (5 min) does not.
	DefaultKeepalive = 30 * time.Second
)

type options struct {
	dialTimeout time.Duration
	backoffMin  time.Duration
	backoffMax  time.Duration
	keepalive   time.Duration
	dialOpts    []grpc.DialOption
	tls         *tls.Config
	tlsFiles    *security.Files
}

// Option configures a Client.
type Option func(*options)

// WithDialTimeout sets how long one endpoint may take to connect before
// the next is tried (default DefaultDialTimeout).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithBackoff sets the bounds of the wait between failed passes of Watch
// (defaults DefaultBackoffMin, DefaultBackoffMax).
func WithBackoff(minWait, maxWait time.Duration) Option {
	return func(o *options) { o.backoffMin, o.backoffMax = minWait, maxWait }
}

// WithKeepalive sets the ping interval of connections with open streams;
// 0 disables pings (default DefaultKeepalive).
func WithKeepalive(d time.Duration) Option { return func(o *options) { o.keepalive = d } }

// WithDialOptions adds grpc dial options, after the client's own (the
// default transport is plaintext; pass credentials here to change it).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// WithTLS connects over TLS with cfg (a cluster with TLS material refuses
// plaintext), verified as crypto/tls verifies cfg. Prefer WithTLSFiles, or
// WithDialOptions(grpc.WithTransportCredentials(m.ClientCredentials(...)))
// of a security.Material: security.Material.ClientConfig alone does not
// check which node answers an IP address.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithTLSFiles connects over TLS: caFile is the cluster CA (PEM) the nodes'
// certificates must chain to, certFile and keyFile the client's certificate
// (spiffe://<cluster>/client/<name>, or /admin/<name> for Kill, Revive,
// Resign and Transfer) and key; certFile and keyFile may be empty (the
// server will then refuse the call). The files are re-read when they change
// on disk, until Close. The server's certificate must name a node of the
// CA's cluster and the host of the endpoint dialed, in a DNS SAN or, for
// an IP address, an IP SAN (security.Material.ClientCredentials).
func WithTLSFiles(caFile, certFile, keyFile string) Option {
	return func(o *options) { o.tlsFiles = &security.Files{CA: caFile, Cert: certFile, Key: keyFile} }
}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("client: closed")

// Client talks to an electord cluster through a list of endpoints. It is
// safe for concurrent use.
type Client struct {
	opts     options
	eps      []*endpoint
	material *security.Material // WithTLSFiles: closed by Close

	mu     sync.Mutex
	closed bool
}

type endpoint struct {
	addr string
	conn *grpc.ClientConn
	api  electordv1.ElectorClient
}

// New returns a Client of the given endpoints (api addresses, host:port),
// with default options. No connection is made until the first call.
func New(endpoints ...string) (*Client, error) {
	return NewWithOptions(endpoints)
}

// NewWithOptions is New with options.
func NewWithOptions(endpoints []string, opts ...Option) (*Client, error) {
	o := options{dialTimeout: DefaultDialTimeout, backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax, keepalive: DefaultKeepalive}
	for _, f := range opts {
		f(&o)
	}
	if len(endpoints) == 0 {
		return nil, errors.New("client: no endpoints")
	}
	if o.dialTimeout <= 0 {
		return nil, fmt.Errorf("client: dial timeout %v must be positive", o.dialTimeout)
	}
	if o.backoffMin <= 0 || o.backoffMax < o.backoffMin {
		return nil, fmt.Errorf("client: backoff bounds %v..%v: need 0 < min <= max", o.backoffMin, o.backoffMax)
	}
	creds := insecure.NewCredentials()
	var material *security.Material
	if o.tlsFiles != nil {
		m, err := security.Load(*o.tlsFiles, security.Options{})
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		material, creds = m, m.ClientCredentials(security.Expect{})
	} else if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect soon after a node comes back; grpc's default waits up to 2 min.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: o.backoffMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: o.backoffMax},
			// grpc gives up on an attempt a little after our own dial
			// timeout, so that a hung endpoint is reported by ready as "no
			// connection within <dial timeout>" rather than by grpc closing
			// the attempt ("use of closed network connection"): with equal
			// timeouts either could fire first (seen in CI).
			MinConnectTimeout: o.dialTimeout + o.dialTimeout/2,
		}),
	}
	if o.keepalive > 0 {
		dial = append(dial, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: o.keepalive, Timeout: o.keepalive / 3}))
	}
	dial = append(dial, o.dialOpts...)
	c := &Client{opts: o, material: material}
	for _, addr := range endpoints {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			c.Close()
			return nil, errors.New("client: empty endpoint")
		}
		conn, err := grpc.NewClient(addr, dial...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("client: endpoint %q: %w", addr, err)
		}
		c.eps = append(c.eps, &endpoint{addr: addr, conn: conn, api: electordv1.NewElectorClient(conn)})
	}
	return c, nil
}

// Endpoints returns the endpoints in the order they are tried.
func (c *Client) Endpoints() []string {
	out := make([]string, len(c.eps))
	for i, ep := range c.eps {
		out[i] = ep.addr
	}
	return out
}

// Close closes every connection. Watch channels close soon after.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	if c.material != nil {
		c.material.Close()
	}
	var errs []error
	for _, ep := range c.eps {
		errs = append(errs, ep.conn.Close())
	}
	return errors.Join(errs...)
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// ---- errors ----

// EndpointError is why one endpoint did not answer.
type EndpointError struct {
	Endpoint string
	Err      error
}

func (e EndpointError) Error() string { return e.Endpoint + ": " + reason(e.Err) }

// Unwrap returns the underlying error.
func (e EndpointError) Unwrap() error { return e.Err }

// NoEndpointError says that no endpoint answered: Tried holds why, in the
// order tried. Ctx is the context's error when the context ended before
// an endpoint answered (then the gRPC code is DeadlineExceeded or
// Canceled rather than Unavailable).
type NoEndpointError struct {
	Tried []EndpointError
	Ctx   error
}

func (e *NoEndpointError) Error() string {
	var head string
	switch {
	case errors.Is(e.Ctx, context.DeadlineExceeded):
		head = "deadline exceeded before an endpoint answered"
	case e.Ctx != nil:
		head = "canceled before an endpoint answered"
	default:
		head = "no endpoint answered"
	}
	if len(e.Tried) == 0 {
		return head
	}
	parts := make([]string, len(e.Tried))
	for i, t := range e.Tried {
		parts[i] = t.Error()
	}
	return head + " (" + strings.Join(parts, "; ") + ")"
}

// Unwrap returns the context's error, if any, and the endpoints' errors.
func (e *NoEndpointError) Unwrap() []error {
	var out []error
	if e.Ctx != nil {
		out = append(out, e.Ctx)
	}
	for _, t := range e.Tried {
		out = append(out, t)
	}
	return out
}

// GRPCStatus makes status.Code work on a NoEndpointError.
func (e *NoEndpointError) GRPCStatus() *status.Status {
	code := codes.Unavailable
	switch {
	case errors.Is(e.Ctx, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case e.Ctx != nil:
		code = codes.Canceled
	}
	return status.New(code, e.Error())
}

// reason is the short cause of a connection error: "connection refused"
// rather than grpc's `connection error: desc = "transport: Error while
// dialing: dial tcp 127.0.0.1:7070: connect: connection refused"`.
func reason(err error) string {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	msg = strings.TrimRight(msg, `"`)
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return msg
}

// unreachable reports whether err means the endpoint could not be asked,
// as opposed to an answer: an Unavailable that did not come from an
// Elector service (which attaches its LeaderInfo to every Unavailable).
func unreachable(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*electordv1.LeaderInfo); ok {
			return false
		}
	}
	return true
}

// ---- calls ----

// ready waits until ep's connection is up or has failed (an RPC then fails
// at once with the reason), for at most the dial timeout.
func (c *Client) ready(ctx context.Context, ep *endpoint) error {
	dctx, cancel := context.WithTimeout(ctx, c.opts.dialTimeout)
	defer cancel()
	for {
		s := ep.conn.GetState()
		switch s {
		case connectivity.Ready, connectivity.TransientFailure:
			return nil
		case connectivity.Shutdown:
			return ErrClosed
		case connectivity.Idle:
			ep.conn.Connect()
		}
		if !ep.conn.WaitForStateChange(dctx, s) {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("no connection within %v", c.opts.dialTimeout)
		}
	}
}

// call runs fn against the first endpoint that answers.
func (c *Client) call(ctx context.Context, fn func(context.Context, electordv1.ElectorClient) error) error {
	var tried []EndpointError
	for _, ep := range c.eps {
		if c.isClosed() {
			return ErrClosed
		}
		err := c.ready(ctx, ep)
		if err == nil {
			err = fn(ctx, ep.api)
			if err == nil || !unreachable(err) {
				return err
			}
		}
		if errors.Is(err, ErrClosed) {
			return ErrClosed
		}
		tried = append(tried, EndpointError{Endpoint: ep.addr, Err: err})
		if ctx.Err() != nil {
			return &NoEndpointError{Tried: tried, Ctx: ctx.Err()}
		}
	}
	return &NoEndpointError{Tried: tried}
}

// Leader returns the leader as the first answering endpoint sees it. No
// known leader is not an error: the result has ID 0 (HasLeader false),
// the last term the node knows and its state.
func (c *Client) Leader(ctx context.Context) (LeaderInfo, error) {
	var li LeaderInfo
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.GetLeader(ctx, &electordv1.GetLeaderRequest{})
		li = leaderFromProto(p)
		return err
	})
	return li, err
}

// IsLeader reports whether the node at the first answering endpoint leads.
// It is meant for a program that runs next to its own electord and gives
// that one endpoint (e.g. New("127.0.0.1:7070")): with several endpoints
// the answer is about whichever node answered.
func (c *Client) IsLeader(ctx context.Context) (bool, error) {
	li, err := c.Leader(ctx)
	return li.Self, err
}

// Status returns the first answering node's view of the cluster.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.Status(ctx, &electordv1.StatusRequest{})
		if err != nil {
			return err
		}
		st = Status{Self: NodeID(p.GetSelfId()), Algorithm: p.GetAlgorithm(), Leader: leaderFromProto(p.GetLeader()), Members: membersFromProto(p.GetMembers())}
		return nil
	})
	return st, err
}

// Members lists every member the first answering node knows, alive or not.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var ms []Member
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := api.Members(ctx, &electordv1.MembersRequest{})
		ms = membersFromProto(p.GetMembers())
		return err
	})
	return ms, err
}

func (c *Client) command(ctx context.Context, fn func(context.Context, electordv1.ElectorClient) (*electordv1.CommandResponse, error)) (CommandResult, error) {
	var res CommandResult
	err := c.call(ctx, func(ctx context.Context, api electordv1.ElectorClient) error {
		p, err := fn(ctx, api)
		if err != nil {
			return err
		}
		res = CommandResult{Message: p.GetMessage(), Leader: leaderFromProto(p.GetLeader())}
		return nil
	})
	return res, err
}

// Kill makes node id crash-stop as its peers see it (its API stays up);
// with exit, its process exits instead. Any endpoint forwards it to id.
// An id that is not a member is NotFound.
//
// Like every command, Kill is sent to the next endpoint only when the
// previous one could not be reached; if a connection breaks after the
// request left, the command may have been carried out before it is sent
// again.
func (c *Client) Kill(ctx context.Context, id NodeID, exit bool) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Kill(ctx, &electordv1.KillRequest{Id: uint64(id), Exit: exit})
	})
}

// Revive undoes Kill of node id.
func (c *Client) Revive(ctx context.Context, id NodeID) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Revive(ctx, &electordv1.ReviveRequest{Id: uint64(id)})
	})
}

// Resign makes the current leader step down (any endpoint forwards it to
// the leader). With no leader known the error is Unavailable.
func (c *Client) Resign(ctx context.Context) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Resign(ctx, &electordv1.ResignRequest{})
	})
}

// Transfer asks the current leader to hand leadership to node id.
func (c *Client) Transfer(ctx context.Context, id NodeID) (CommandResult, error) {
	return c.command(ctx, func(ctx context.Context, api electordv1.ElectorClient) (*electordv1.CommandResponse, error) {
		return api.Transfer(ctx, &electordv1.TransferRequest{Id: uint64(id)})
	})
}

// ---- watch ----

// Event is one item of a Watch channel: a leadership event, or (Err set) a
// note that the stream broke or that no endpoint answered; Watch keeps
// trying after either.
type Event struct {
	Leader   LeaderInfo // as the node at Endpoint sees it
	Seq      uint64     // the server's sequence number on this stream (from 1)
	Dropped  uint64     // changes the server skipped since the previous event (slow reader)
	Endpoint string     // the endpoint the event came from
	// Resumed marks the first event of a stream that replaced a broken
	// one: it is that node's current view, at or after the last term seen.
	Resumed bool
	// Err is set on an error event (Leader is zero then): a *NoEndpointError
	// when a whole pass over the endpoints failed, or the reason a stream
	// ended.
	Err error
}

// Watch streams leadership changes until ctx ends, then closes the channel.
// The first event is the current leader as the first answering endpoint
// sees it. When the stream breaks, Watch tries the endpoints again in
// order, resuming after the highest leader term it has delivered (the server then
// skips views older than that term); after a pass in which no endpoint
// answered it waits (exponential backoff with jitter) before the next one.
// Read the channel promptly: while it is not read, the server drops events
// for this watcher (counted in Dropped) but the newest state always comes.
func (c *Client) Watch(ctx context.Context) <-chan Event {
	out := make(chan Event)
	go c.watch(ctx, out)
	return out
}

func (c *Client) watch(ctx context.Context, out chan<- Event) {
	defer close(out)
	emit := func(ev Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var (
		after   Term // the highest term of a leader delivered
		streams int  // streams that delivered an event
		wait    = c.opts.backoffMin
	)
	for ctx.Err() == nil && !c.isClosed() {
		var tried []EndpointError
		progressed := false
		for _, ep := range c.eps {
			err := c.ready(ctx, ep)
			got := 0
			if err == nil {
				got, err = c.stream(ctx, ep, &after, streams > 0, emit)
			}
			if ctx.Err() != nil || c.isClosed() {
				return
			}
			if got > 0 {
				streams++
				progressed = true
				if !emit(Event{Endpoint: ep.addr, Err: fmt.Errorf("watch stream from %s ended: %w", ep.addr, err)}) {
					return
				}
				break // start over from the first endpoint
			}
			tried = append(tried, EndpointError{Endpoint: ep.addr, Err: err})
		}
		if progressed {
			wait = c.opts.backoffMin
			continue
		}
		if !emit(Event{Err: &NoEndpointError{Tried: tried}}) {
			return
		}
		// Full jitter in [wait/2, wait), then double.
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, c.opts.backoffMax)
	}
}

// stream runs one WatchLeader stream until it fails; it returns how many
// events it delivered.
func (c *Client) stream(ctx context.Context, ep *endpoint, after *Term, resumed bool, emit func(Event) bool) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := ep.api.WatchLeader(sctx, &electordv1.WatchLeaderRequest{AfterTerm: uint64(*after)})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		p, err := s.Recv()
		if err != nil {
			return n, err
		}
		ev := Event{Leader: leaderFromProto(p.GetLeader()), Seq: p.GetSeq(), Dropped: p.GetDropped(), Endpoint: ep.addr, Resumed: resumed && n == 0}
		// Only a leader's term moves the resume point: a no-leader event
		// carries the highest term its node knows (a campaign's, say), which
		// the leader finally agreed on may not reach.
		if ev.Leader.HasLeader() && ev.Leader.Term > *after {
			*after = ev.Leader.Term
		}
		if !emit(ev) {
			return n, ctx.Err()
		}
		n++
	}
}

// ---- conversions ----

func leaderFromProto(p *electordv1.LeaderInfo) LeaderInfo {
	if p == nil {
		return LeaderInfo{}
	}
	var since time.Time
	if ns := p.GetSinceUnixNano(); ns != 0 {
		since = time.Unix(0, ns).UTC()
	}
	return LeaderInfo{
		ID: NodeID(p.GetId()), Name: p.GetName(), Address: p.GetAddress(), Term: Term(p.GetTerm()),
		Since: since, Self: p.GetSelf(), State: p.GetState(),
	}
}

func membersFromProto(ps []*electordv1.MemberStatus) []Member {
	out := make([]Member, len(ps))
	for i, p := range ps {
		out[i] = Member{
			ID: NodeID(p.GetId()), Name: p.GetName(), Priority: p.GetPriority(), PeerAddr: p.GetPeerAddress(),
			APIAddr: p.GetApiAddress(), Alive: p.GetAlive(), Role: p.GetRole(), Term: Term(p.GetTerm()), Algorithm: p.GetAlgorithm(),
		}
	}
	return out
}
