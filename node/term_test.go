package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/electord/electord/election"
	"github.com/electord/electord/transport"
)

// A restarted node that has no leader yet reports its persisted leadership
// term (the last leadership it knew), not 0
// (issue 11): in Leader, in the first event of a subscription, and in
// Status, before Run and while it runs leaderless (quorum 3, alone).
func TestRestartedNodeReportsPersistedTermWithoutLeader(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		t.Run(algo, func(t *testing.T) {
			dir := t.TempDir()
			store, err := OpenTermStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Save(election.Term(60<<election.SlotBits|2), election.Term(58<<election.SlotBits|3)); err != nil {
				t.Fatal(err)
			}
			store, err = OpenTermStore(dir) // as after a restart
			if err != nil {
				t.Fatal(err)
			}
			saved, err := store.Load()
			if err != nil {
				t.Fatal(err)
			}
			persisted := saved.LeaderTerm
			hub := &gossipHub{members: map[election.NodeID]*fakeGossip{}}
			self := Meta{ID: 1, Name: "n1", PeerAddr: "mem:1"}
			in := NewInbox(0)
			nd, err := New(fast(Config{Self: self, Algorithm: algo, Store: store, Quorum: 3, Inbox: in,
				Transport:     transport.NewNetwork().Join(1, in),
				NewMembership: func() (Membership, error) { return hub.join(self), nil }}))
			if err != nil {
				t.Fatal(err)
			}
			check := func(when string) {
				t.Helper()
				li := nd.Leader()
				if li.HasLeader() {
					t.Fatalf("%s: a lone node in quorum 3 leads: %+v", when, li)
				}
				if li.Term < persisted {
					t.Fatalf("%s: no-leader answer reports term %v, below the persisted %v", when, li.Term, persisted)
				}
				if st := nd.Status(); st.Leader.Term < persisted {
					t.Fatalf("%s: Status().Leader reports term %v, below the persisted %v", when, st.Leader.Term, persisted)
				}
				sub := nd.Subscribe()
				defer sub.Close()
				if first := <-sub.C(); first.Term < persisted {
					t.Fatalf("%s: first watch event reports term %v, below the persisted %v", when, first.Term, persisted)
				}
			}
			check("before Run")
			ctx, cancel := context.WithCancel(context.Background())
			go nd.Run(ctx)
			defer func() { cancel(); <-nd.Done() }()
			for range 5 {
				time.Sleep(50 * time.Millisecond) // several ticks and election timeouts
				check("while running alone")
			}
			if err := nd.Kill(context.Background()); err != nil {
				t.Fatal(err)
			}
			check("killed")
		})
	}
}

// A (re)started node reserves the terms of its next elections before it
// takes part: its first election after a restart would otherwise mint a
// term above the file's reserve and wait for the term file's full write on
// a failover's critical path (issue 10: 60-250 ms of a slow crash failover
// on a loaded host).
func TestStartReservesTheNextTerms(t *testing.T) {
	dir := t.TempDir()
	store, err := OpenTermStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(election.Term(60<<election.SlotBits|2), 0); err != nil {
		t.Fatal(err)
	}
	// A restart starts from the reserve: its first election mints the term
	// after it.
	first := election.NextTerm(store.Durable().Term, 3)
	store, err = OpenTermStore(dir) // as after a restart
	if err != nil {
		t.Fatal(err)
	}
	hub := &gossipHub{members: map[election.NodeID]*fakeGossip{}}
	self := Meta{ID: 3, Name: "n3", PeerAddr: "mem:3"}
	in := NewInbox(0)
	_, err = New(fast(Config{Self: self, Algorithm: "bully", Store: store, Inbox: in,
		Transport:     transport.NewNetwork().Join(3, in),
		NewMembership: func() (Membership, error) { return hub.join(self), nil }}))
	if err != nil {
		t.Fatal(err)
	}
	if saved := store.Durable(); saved.Term < first {
		t.Fatalf("after start the term file reserves up to %v; the first election's term %v is not covered", saved.Term, first)
	}
	termPath := filepath.Join(dir, termFile)
	before, err := os.Stat(termPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(first, first); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(termPath); err != nil || !os.SameFile(before, after) {
		t.Fatalf("the first leadership after start rewrote the term file (%v)", err)
	}
}
