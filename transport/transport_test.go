package transport

import (
	"errors"
	"reflect"
	"testing"

	"github.com/electord/electord/election"
)

func TestLateReceiverForwardsOnceSet(t *testing.T) {
	var l LateReceiver
	m := election.Message{Type: election.MsgAnswer, From: 2, To: 1, Term: 1}
	if err := l.Receive(Inbound{Msg: m}); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Receive before Set: %v, want ErrNotServing", err)
	}
	l.Failed(m, errors.New("dropped")) // no receiver yet: dropped

	r := newFakeReceiver(1)
	l.Set(r)
	if err := l.Receive(Inbound{Msg: m}); err != nil {
		t.Fatalf("Receive after Set: %v", err)
	}
	if got := r.next(t).Msg; !reflect.DeepEqual(got, m) {
		t.Fatalf("forwarded %+v", got)
	}
	boom := errors.New("boom")
	l.Failed(m, boom)
	if f := r.nextFailure(t); !errors.Is(f.err, boom) {
		t.Fatalf("failure forwarded as %v", f.err)
	}
	r.noFailure(t) // the failure before Set was not kept
}
