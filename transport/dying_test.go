package transport

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/electord/electord/election"
)

// dyingListener plays a SIGKILLed process on a live host: its kernel resets
// the established connection (here: the first one, as soon as it arrives)
// before it closes the listening socket, which still completes one more
// handshake (the next dial, as a probe's) and is then closed: every later
// dial is refused.
func dyingListener(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { lis.Close() }) })
	go func() {
		for n := 0; ; n++ {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			if n == 0 {
				c.(*net.TCPConn).SetLinger(0) // close with RST
				c.Close()
				continue
			}
			once.Do(func() { lis.Close() })
			c.Close()
			return
		}
	}()
	return lis.Addr().String()
}

// TestGRPCHeartbeatToADyingListenerIsPeerDown: a heartbeat reset by a peer
// whose listening socket outlives its connections for a moment is still
// reported as ErrPeerDown, promptly: the probe that the dying listener
// accepted must not make the transport wait for the peer to come back.
func TestGRPCHeartbeatToADyingListenerIsPeerDown(t *testing.T) {
	cli := newFakeReceiver(1)
	tr := newGRPC(t, GRPCConfig{MaxMessageBytes: maxMsg, Self: 1, Receiver: cli, SendTimeout: 2 * time.Second})
	tr.SetPeer(2, dyingListener(t))
	start := time.Now()
	tr.Send(election.Message{Type: election.MsgHeartbeat, From: 1, To: 2, Term: 1, Leader: 2})
	f := cli.nextFailure(t)
	took := time.Since(start)
	t.Logf("failed after %v: %v", took, f.err)
	if !errors.Is(f.err, ErrPeerDown) {
		t.Fatalf("heartbeat to a dying listener failed with %v after %v, want ErrPeerDown", f.err, took)
	}
}
