package transport

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The budget allows peer-max-buffered-bytes / the stream window streams in
// flight (32 with the defaults, at least one), refuses one more with
// ResourceExhausted naming the key and counts it, and gives a slot back
// when its stream's context ends.
func TestStreamBudget(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		msg   int
		want  int64
	}{{32 << 20, DefaultMaxMessageBytes, 32}, {3<<20 + 1, DefaultMaxMessageBytes, 3}, {1000, DefaultMaxMessageBytes, 1}, {1 << 20, 1000, 16}} {
		if got := NewPeerService(1, nil).newStreamBudget(c.bytes, c.msg).max; got != c.want {
			t.Errorf("%d bytes, %d-byte messages: %d streams, want %d", c.bytes, c.msg, got, c.want)
		}
	}

	svc := NewPeerService(1, nil)
	b := svc.newStreamBudget(2<<20, DefaultMaxMessageBytes)
	var cancels []context.CancelFunc
	open := func() error {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		_, err := b.tap(ctx, nil)
		return err
	}
	if err := open(); err != nil {
		t.Fatal(err)
	}
	if err := open(); err != nil {
		t.Fatal(err)
	}
	err := open()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "peer-max-buffered-bytes") {
		t.Fatalf("third stream: %v, want ResourceExhausted naming peer-max-buffered-bytes", err)
	}
	if st := svc.Stats(); st.RejectedBudget != 1 || st.StreamsInFlight != 2 {
		t.Fatalf("stats %+v", st)
	}
	cancels[2]() // the refused stream's end gives nothing back
	cancels[0]()
	eventually(t, "a slot given back", func() bool { return svc.Stats().StreamsInFlight == 1 })
	if err := open(); err != nil {
		t.Fatalf("a freed slot: %v", err)
	}
	if err := open(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("beyond the budget again: %v", err)
	}
	for _, c := range cancels {
		c()
	}
	eventually(t, "every slot given back", func() bool { return svc.Stats().StreamsInFlight == 0 })
	if st := svc.Stats(); st.RejectedBudget != 2 {
		t.Fatalf("stats %+v", st)
	}
}
