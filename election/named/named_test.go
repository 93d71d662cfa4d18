package named

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/electord/electord/election"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "jobs", "shard-0", "A.b_c-9", strings.Repeat("x", MaxNameLen), "..."} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":                                "empty",
		strings.Repeat("x", MaxNameLen+1): "129 bytes, at most 128",
		"jobs/1":                          `byte '/' at offset 4`,
		"a b":                             `byte ' ' at offset 1`,
		"é":                               "offset 0",
		"x\x00":                           "offset 1",
		".":                               "path segment",
		"..":                              "path segment",
	} {
		err := CheckName(name)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckName(%q) = %v, want ErrInvalidName saying %q", name, err, want)
		}
	}
}

func TestCheckValue(t *testing.T) {
	if err := CheckValue(strings.Repeat("v", MaxValueLen)); err != nil {
		t.Fatal(err)
	}
	if err := CheckValue(strings.Repeat("v", MaxValueLen+1)); !errors.Is(err, ErrValueTooLong) {
		t.Fatalf("got %v, want ErrValueTooLong", err)
	}
}

func TestQueuesFirstComeFirstServed(t *testing.T) {
	var q Queues
	a, head, err := q.Add("jobs", "app-a", 0)
	if err != nil || !head {
		t.Fatalf("first Add: head %v err %v", head, err)
	}
	b, head, _ := q.Add("jobs", "app-b", 5) // a higher priority does not jump the local queue
	if head {
		t.Fatal("second Add is the head")
	}
	c, head, _ := q.Add("jobs", "app-c", 0)
	if head {
		t.Fatal("third Add is the head")
	}
	if _, head, _ := q.Add("other", "x", 0); !head {
		t.Fatal("another election has its own queue")
	}
	if p, _ := q.Position(c.ID); p != 2 {
		t.Fatalf("c at %d, want 2", p)
	}

	// A waiting candidacy leaves: the head does not change.
	gone, wasHead, next, ok, err := q.Remove(b.ID)
	if err != nil || wasHead || gone != b || !ok || next != a {
		t.Fatalf("Remove(b) = %v %v %v %v %v", gone, wasHead, next, ok, err)
	}
	// The head leaves: the next in line is the head.
	_, wasHead, next, ok, _ = q.Remove(a.ID)
	if !wasHead || !ok || next != c {
		t.Fatalf("Remove(a): wasHead %v next %v ok %v, want c", wasHead, next, ok)
	}
	if h, _ := q.Head("jobs"); h != c {
		t.Fatalf("head %v, want c", h)
	}
	if isHead, err := q.SetValue(c.ID, "app-c2"); err != nil || !isHead {
		t.Fatalf("SetValue: %v %v", isHead, err)
	}
	if h, _ := q.Head("jobs"); h.Value != "app-c2" {
		t.Fatalf("value %q after SetValue", h.Value)
	}
	if got := q.Elections(); !slices.Equal(got, []string{"jobs", "other"}) {
		t.Fatalf("Elections = %v", got)
	}
	// The last one leaves: the election has no local queue any more.
	if _, wasHead, _, ok, _ = q.Remove(c.ID); !wasHead || ok {
		t.Fatalf("Remove(c): wasHead %v, next ok %v", wasHead, ok)
	}
	if _, ok := q.Head("jobs"); ok {
		t.Fatal("jobs still has a head")
	}
	if _, _, _, _, err := q.Remove(c.ID); !errors.Is(err, ErrUnknownCandidacy) {
		t.Fatalf("second Remove: %v", err)
	}
	if q.Len() != 1 {
		t.Fatalf("Len %d, want 1", q.Len())
	}
}

func TestQueuesRefuseBadInput(t *testing.T) {
	var q Queues
	if _, _, err := q.Add("no/slash", "", 0); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, _, err := q.Add("jobs", strings.Repeat("v", MaxValueLen+1), 0); !errors.Is(err, ErrValueTooLong) {
		t.Fatalf("long value: %v", err)
	}
	if q.Len() != 0 {
		t.Fatal("a refused candidacy was queued")
	}
	c, _, _ := q.Add("jobs", "", 0)
	if _, err := q.SetValue(c.ID, strings.Repeat("v", MaxValueLen+1)); !errors.Is(err, ErrValueTooLong) {
		t.Fatalf("long proclaim: %v", err)
	}
	if _, err := q.SetValue(c.ID+1, "x"); !errors.Is(err, ErrUnknownCandidacy) {
		t.Fatalf("unknown proclaim: %v", err)
	}
}

func TestTable(t *testing.T) {
	var tb Table
	if joined, _ := tb.Set("jobs", 2, Stand{Priority: 1, Value: "b"}); !joined {
		t.Fatal("first Set did not join")
	}
	if joined, re := tb.Set("jobs", 2, Stand{Priority: 1, Value: "b2"}); joined || re {
		t.Fatal("a new value is not a new member nor a new rank")
	}
	if _, re := tb.Set("jobs", 2, Stand{Priority: 3, Value: "b2"}); !re {
		t.Fatal("a new priority is a new rank")
	}
	tb.Set("jobs", 3, Stand{Value: "c"})
	tb.Set("other", 3, Stand{})
	if got := tb.Members("jobs"); !slices.Equal(got, []election.Member{{ID: 3}, {ID: 2, Priority: 3}}) {
		t.Fatalf("Members = %v", got)
	}
	if _, _, ok := tb.Leader("jobs"); ok {
		t.Fatal("a leader nobody claims")
	}
	t1, t2 := election.NextTerm(0, 2), election.NextTerm(election.NextTerm(0, 2), 3)
	tb.Set("jobs", 2, Stand{Priority: 3, Value: "b2", LeaderTerm: t1})
	tb.Set("jobs", 3, Stand{Value: "c", LeaderTerm: t2}) // a later leadership, not yet stepped down from by 2
	if id, s, ok := tb.Leader("jobs"); !ok || id != 3 || s.Value != "c" {
		t.Fatalf("Leader = %d %v %v, want 3 at the higher term", id, s, ok)
	}
	if got := tb.Forget(3); !slices.Equal(got, []string{"jobs", "other"}) {
		t.Fatalf("Forget(3) = %v", got)
	}
	if id, _, _ := tb.Leader("jobs"); id != 2 {
		t.Fatalf("after 3 is gone the leader is %d", id)
	}
	if got := tb.Elections(); !slices.Equal(got, []string{"jobs"}) {
		t.Fatalf("Elections = %v", got)
	}
	if !tb.Withdraw("jobs", 2) || tb.Withdraw("jobs", 2) {
		t.Fatal("Withdraw reports wrongly")
	}
	if len(tb.Elections()) != 0 {
		t.Fatal("an election with no candidate is kept")
	}
}

// A node's incarnation grows at each start of its process: a later one
// voids the node's candidacies of the earlier one, in every election; an
// earlier one is a dead process's word.
func TestTableRenew(t *testing.T) {
	var tb Table
	if r, v := tb.Renew(2, 0); r != Current || v != nil {
		t.Fatalf("no incarnation given: %v %v", r, v)
	}
	if r, v := tb.Renew(2, 10); r != Current || v != nil {
		t.Fatalf("the first incarnation heard: %v %v", r, v)
	}
	tb.Set("jobs", 2, Stand{Priority: 1})
	tb.Set("other", 2, Stand{})
	tb.Set("jobs", 3, Stand{})
	if r, v := tb.Renew(2, 10); r != Current || v != nil {
		t.Fatalf("the same incarnation again: %v %v", r, v)
	}
	if r, v := tb.Renew(2, 0); r != Current || v != nil {
		t.Fatalf("no incarnation given after one: %v %v", r, v)
	}
	if r, v := tb.Renew(2, 11); r != Restarted || !slices.Equal(v, []string{"jobs", "other"}) {
		t.Fatalf("a later incarnation: %v %v, want Restarted voiding jobs and other", r, v)
	}
	if _, ok := tb.Get("jobs", 2); ok {
		t.Fatal("the earlier incarnation's candidacy is kept")
	}
	if _, ok := tb.Get("jobs", 3); !ok {
		t.Fatal("another node's candidacy was voided")
	}
	if r, _ := tb.Renew(2, 10); r != Stale {
		t.Fatalf("an earlier incarnation: %v, want Stale", r)
	}
	if r, v := tb.Renew(2, 11); r != Current || v != nil {
		t.Fatalf("the current incarnation after a stale word: %v %v", r, v)
	}
}
