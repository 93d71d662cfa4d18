package api

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/electord/electord/election/named"
	"github.com/electord/electord/node"
	"github.com/electord/electord/security"
)

// A candidacy is its app's: with TLS, the server records which identity
// (the client certificate of the stream's connection) opened each campaign
// stream, and a Proclaim of a candidacy by another identity needs the
// admin role, as resigning or transferring another's leadership does.
// Without TLS the API has no authorization at all (anyone may kill the
// node), so nothing is recorded. The sidecar (HTTP on loopback) is not
// concerned: it has no identities.

// owners is who opened each candidacy served by this API's campaign
// streams, while the stream lasts. Candidacy ids are a node's own and
// never reused, so an id names one candidacy for the node's life.
type owners struct {
	mu sync.Mutex
	by map[named.ID]owner
	// mine lists, per election and identity, the ids it opened there
	// (a Proclaim that names none).
	mine map[[2]string][]named.ID
}

type owner struct{ election, who string }

// ownAll records that the caller of ctx opened every one of cs (one
// stream's candidacies), until the returned func is called.
func (s *service) ownAll(ctx context.Context, cs []*node.Candidacy) func() {
	if s.sec == nil {
		return func() {}
	}
	undo := make([]func(), len(cs))
	for i, c := range cs {
		undo[i] = s.own(ctx, c)
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}
}

// own records that the caller of ctx opened c, until the returned func is
// called (at the stream's end). A no-op without TLS.
func (s *service) own(ctx context.Context, c *node.Candidacy) func() {
	if s.sec == nil {
		return func() {}
	}
	id, err := callerIdentity(ctx)
	if err != nil {
		return func() {} // the interceptor refused such a caller already
	}
	o, who := &s.owners, id.String()
	key := [2]string{c.Election, who}
	o.mu.Lock()
	if o.by == nil {
		o.by, o.mine = map[named.ID]owner{}, map[[2]string][]named.ID{}
	}
	o.by[c.ID] = owner{c.Election, who}
	o.mine[key] = append(o.mine[key], c.ID)
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.by, c.ID)
		if ids := slices.DeleteFunc(o.mine[key], func(x named.ID) bool { return x == c.ID }); len(ids) > 0 {
			o.mine[key] = ids
		} else {
			delete(o.mine, key)
		}
	}
}

// proclaimable is the candidacy a Proclaim of id in election by the caller
// of ctx acts on, or why it may not. Without TLS, and for an admin, id
// as asked (0: the one the node stands for). Any other caller only its own
// candidacies: id must be one it opened; 0 is its candidacy in the
// election on this node (it must hold exactly one there), so an app that
// names none changes its own value, never another app's.
func (s *service) proclaimable(ctx context.Context, election string, id named.ID) (named.ID, error) {
	if s.sec == nil {
		return id, nil
	}
	who, err := callerIdentity(ctx)
	if err != nil {
		return 0, s.sec.deny(codes.Unauthenticated, "Proclaim", "", err.Error())
	}
	if who.Role == security.RoleAdmin {
		return id, nil
	}
	o := &s.owners
	o.mu.Lock()
	own, mine := o.by[id], slices.Clone(o.mine[[2]string{election, who.String()}])
	o.mu.Unlock()
	switch {
	case id != 0 && own == owner{election, who.String()}:
		return id, nil
	case id != 0:
		return 0, s.sec.deny(codes.PermissionDenied, "Proclaim", who.String(),
			fmt.Sprintf("candidacy %d in %s was not opened by this identity; proclaiming another's candidacy needs the admin role", id, election))
	case len(mine) == 1:
		return mine[0], nil
	case len(mine) == 0:
		return 0, s.sec.deny(codes.PermissionDenied, "Proclaim", who.String(),
			fmt.Sprintf("this identity holds no candidacy in %s on node %d; proclaiming the one the node stands for needs the admin role", election, s.b.Self()))
	}
	return 0, grpcstatus.Errorf(codes.FailedPrecondition,
		"this identity holds %d candidacies in %s on node %d: name one (the candidacy of its campaign events)", len(mine), election, s.b.Self())
}
