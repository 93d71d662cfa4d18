package status

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// grpcAsker asks members through their client API's GetLeader, dialled
// as the API's own forwarding dials (daemon's ForwardTLS: this node's
// certificate, when TLS is on). It keeps one connection per address while
// it lives: the page's poller makes one and closes it when the last page
// closes. After each round (endRound) it closes the connections to
// addresses it was not asked to dial in that round: a member that died,
// left or moved (a pod restarted with a new IP) leaves no connection that
// keeps reconnecting while a page stays open.
type grpcAsker struct {
	creds credentials.TransportCredentials
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	used  map[string]bool // the addresses dialled in this round
}

func newAsker(tlsCfg *tls.Config) *grpcAsker {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	return &grpcAsker{creds: creds, conns: map[string]*grpc.ClientConn{}, used: map[string]bool{}}
}

func (a *grpcAsker) conn(addr string) (*grpc.ClientConn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used[addr] = true
	if c := a.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(a.creds))
	if err != nil {
		return nil, err
	}
	a.conns[addr] = c
	return c, nil
}

func (a *grpcAsker) ask(ctx context.Context, addr string) answer {
	c, err := a.conn(addr)
	if err != nil {
		return answer{err: err}
	}
	li, err := electordv1.NewElectorClient(c).GetLeader(ctx, &electordv1.GetLeaderRequest{})
	if err != nil {
		st := status.Convert(err)
		return answer{err: errors.New(st.Code().String() + ": " + st.Message())}
	}
	return answer{leader: election.NodeID(li.GetId()), term: election.Term(li.GetTerm()), state: li.GetState()}
}

// endRound closes the connections to the addresses not dialled since the
// last round ended.
func (a *grpcAsker) endRound() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for addr, c := range a.conns {
		if !a.used[addr] {
			c.Close()
			delete(a.conns, addr)
		}
	}
	clear(a.used)
}

// addrs lists the addresses it holds a connection to.
func (a *grpcAsker) addrs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.conns))
}

// close closes every connection.
func (a *grpcAsker) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for addr, c := range a.conns {
		c.Close()
		delete(a.conns, addr)
	}
}

// killedErr reports whether a member's answer says it was killed (electctl
// kill): its API then serves only kill and revive.
func killedErr(err error) bool {
	return strings.HasPrefix(err.Error(), codes.Unavailable.String()+": ") && strings.Contains(err.Error(), " is killed ")
}
