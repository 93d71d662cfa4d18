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
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

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
	// Election is the named election ("" for the default election).
	Election string `json:"election,omitempty"`
	// Value is a named election's leading candidacy's value.
	Value string `json:"value,omitempty"`
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
	// NotStanding says why the answering node is no candidate in the
	// default election ("" while it is one, or from a server that predates
	// it): its candidate probe fails.
	NotStanding string `json:"not_standing,omitempty"`
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
