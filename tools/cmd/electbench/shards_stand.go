package main

// The candidate side of `electbench shards`: every node's candidate app
// stands in every election through that node. How the app holds its
// candidacies is behind candidateApp, so that the benchmark can use one stream
// per election (the Go client's Campaign, today) or one stream for many
// elections once the client has it, without changing the measurement.

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/electord/electord/client"
	pb "github.com/electord/electord/proto/electord/v1"
)

// candidateApp is one node's candidate app: it holds a candidacy in every
// election it was asked to stand in, through its node, until close (or
// until the node dies, which ends them all).
type candidateApp interface {
	// stand opens the candidacies and returns once the node has registered
	// every one of them.
	stand(ctx context.Context, names []string) error
	close()
	// crash ends the app as its process's death would: its connections
	// close, and no stream is ended first.
	crash()
}

// standFactory makes one node's candidate app: its node's API address and
// the value every candidacy stands with.
type standFactory func(api, value string, opts []client.CampaignOption) candidateApp

// standModes are the ways a candidate app can hold its candidacies, by the
// name --streams takes.
var standModes = map[string]standFactory{
	"per-election": newPerElection,
}

// perElection holds one Campaign (one gRPC stream) per election. A node
// serves at most --max-streams (default 100) streams on one connection and
// holds a further stream back until one ends, so the app spreads its
// campaigns over clients of campaignsPerConn each, one connection apiece.
type perElection struct {
	api, value string
	opts       []client.CampaignOption

	mu      sync.Mutex
	clients []*client.Client
	camps   []*client.Campaign
}

// campaignsPerConn stays below electord's default --max-streams (100).
const campaignsPerConn = 90

// standWorkers is how many Campaign calls one app has in flight at once.
const standWorkers = 32

func newPerElection(api, value string, opts []client.CampaignOption) candidateApp {
	return &perElection{api: api, value: value, opts: opts}
}

func (s *perElection) stand(ctx context.Context, names []string) error {
	// Clients first, one per campaignsPerConn names, so that the workers
	// below never share a connection beyond the stream limit.
	var groups [][]string
	for i := 0; i < len(names); i += campaignsPerConn {
		groups = append(groups, names[i:min(i+campaignsPerConn, len(names))])
	}
	type job struct {
		cl   *client.Client
		name string
	}
	jobs := make(chan job)
	errs := make(chan error, standWorkers)
	var wg sync.WaitGroup
	for range standWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				cp, err := j.cl.Campaign(ctx, j.name, s.value, s.opts...)
				if err != nil {
					errs <- fmt.Errorf("campaign %s through %s: %w", j.name, s.api, err)
					return
				}
				s.mu.Lock()
				s.camps = append(s.camps, cp)
				s.mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for _, g := range groups {
		cl, e := client.New(s.api)
		if e != nil {
			err = e
			break
		}
		s.mu.Lock()
		s.clients = append(s.clients, cl)
		s.mu.Unlock()
		for _, name := range g {
			select {
			case jobs <- job{cl, name}:
			case err = <-errs:
				break feed
			case <-ctx.Done():
				s.mu.Lock()
				err = fmt.Errorf("%d of %d campaigns through %s open when it ended: %w", len(s.camps), len(names), s.api, ctx.Err())
				s.mu.Unlock()
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

func (s *perElection) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var wg sync.WaitGroup
	for _, cp := range s.camps {
		wg.Add(1)
		go func() { defer wg.Done(); cp.Close() }()
	}
	wg.Wait()
	for _, cl := range s.clients {
		cl.Close()
	}
	s.camps, s.clients = nil, nil
}

func (s *perElection) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cl := range s.clients {
		cl.Close()
	}
	s.camps, s.clients = nil, nil
}

// placementOption asks the campaigns for a placement. The API carries a
// placement only once CampaignRequest has that field; the option finds it by
// name, so the benchmark needs no change when it lands, and an API without
// it gets a clear error instead of a silently sticky run. "" asks for
// nothing (the node's default).
func placementOption(placement string) (client.CampaignOption, error) {
	if placement == "" {
		return nil, nil
	}
	f := (&pb.CampaignRequest{}).ProtoReflect().Descriptor().Fields().ByName("placement")
	if f == nil || f.Kind() != protoreflect.StringKind {
		return nil, fmt.Errorf("--placement %s: this build's CampaignRequest has no placement field (placement is not in the API yet); leave --placement empty for the default", placement)
	}
	return func(r *pb.CampaignRequest) { r.ProtoReflect().Set(f, protoreflect.ValueOfString(placement)) }, nil
}
