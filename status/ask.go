package status

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/election"
	electordv1 "github.com/electord/electord/proto/electord/v1"
)

// grpcAsker asks members through their client API's GetLeader, dialled
// as the API's own forwarding dials (daemon's security.Material
// ForwardCredentials: this node's certificate, and the member answering
// must present the certificate of the id it is asked as, when TLS is on).
// It keeps one connection per member (id and address) while it lives: the
// page's poller makes one and closes it when the last page closes. After
// each round (endRound) it closes the connections it was not asked to dial
// in that round: a member that died, left or moved (a pod restarted with a
// new IP) leaves no connection that keeps reconnecting while a page stays
// open.
type grpcAsker struct {
	creds func(id uint64) credentials.TransportCredentials // nil: plaintext
	mu    sync.Mutex
	conns map[target]*grpc.ClientConn
	used  map[target]bool // the members dialled in this round
}

// target is a member asked: the id it must prove (with TLS) at its address.
type target struct {
	id   election.NodeID
	addr string
}

func newAsker(creds func(id uint64) credentials.TransportCredentials) *grpcAsker {
	return &grpcAsker{creds: creds, conns: map[target]*grpc.ClientConn{}, used: map[target]bool{}}
}

func (a *grpcAsker) conn(t target) (*grpc.ClientConn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used[t] = true
	if c := a.conns[t]; c != nil {
		return c, nil
	}
	creds := insecure.NewCredentials()
	if a.creds != nil {
		creds = a.creds(uint64(t.id))
	}
	c, err := grpc.NewClient(t.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	a.conns[t] = c
	return c, nil
}

func (a *grpcAsker) ask(ctx context.Context, id election.NodeID, addr string) answer {
	c, err := a.conn(target{id, addr})
	if err != nil {
		return answer{err: err}
	}
	li, err := electordv1.NewElectorClient(c).GetLeader(ctx, &electordv1.GetLeaderRequest{})
	if err != nil {
		st := grpcstatus.Convert(err)
		return answer{err: errors.New(st.Code().String() + ": " + st.Message())}
	}
	return answer{leader: election.NodeID(li.GetId()), term: election.Term(li.GetTerm()), state: li.GetState()}
}

// endRound closes the connections to the members not dialled since the
// last round ended.
func (a *grpcAsker) endRound() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for t, c := range a.conns {
		if !a.used[t] {
			c.Close()
			delete(a.conns, t)
		}
	}
	clear(a.used)
}

// addrs lists the addresses it holds a connection to.
func (a *grpcAsker) addrs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for t := range a.conns {
		out = append(out, t.addr)
	}
	slices.SortFunc(out, cmp.Compare)
	return slices.Compact(out)
}

// close closes every connection.
func (a *grpcAsker) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for t, c := range a.conns {
		c.Close()
		delete(a.conns, t)
	}
}

// killedErr reports whether a member's answer says it was killed (electctl
// kill): its API then serves only kill and revive.
func killedErr(err error) bool {
	return strings.HasPrefix(err.Error(), codes.Unavailable.String()+": ") && strings.Contains(err.Error(), " is killed ")
}
