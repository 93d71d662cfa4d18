package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/electord/electord/daemon"
	"github.com/electord/electord/daemon/devcluster"
)

// A daemon applies max-header-list-bytes to its API (gRPC) and sidecar
// (HTTP) servers and max-message-bytes to API requests: with 4 KiB, a
// 6 KiB header list fails on the API, a 12 KiB header block gets 431 from
// the sidecar, and an 8 KiB request gets ResourceExhausted, logged with a
// text naming max-message-bytes (before, nothing was logged). Before, the
// limits were 16 KiB, 16 KiB and 64 KiB.
func TestDaemonAPILimitsFromConfig(t *testing.T) {
	cfg := devcluster.Config(1, devcluster.Options{Nodes: 1, Algorithm: "bully"}, t.TempDir(), nil)
	cfg.MaxHeaderListBytes, cfg.MaxMessageBytes = 4096, 4096
	var logged lockedLog
	d, err := daemon.Start(cfg, daemon.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })

	cc, err := grpc.NewClient(d.APIAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const method = "/electord.v1.Elector/GetLeader"
	// The client learns the limit from the server's SETTINGS: make one call first.
	if err := cc.Invoke(ctx, method, &wrapperspb.BytesValue{}, &wrapperspb.BytesValue{}); err != nil && grpcstatus.Code(err) == codes.Unavailable {
		t.Fatalf("the API: %v", err)
	}
	big := metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("a", 3<<10), "x-pad-2", strings.Repeat("b", 3<<10))
	err = cc.Invoke(big, method, &wrapperspb.BytesValue{}, &wrapperspb.BytesValue{})
	if c := grpcstatus.Code(err); c == codes.OK || c == codes.Unimplemented {
		t.Errorf("a 6 KiB header list on the API with max-header-list-bytes 4096: %v, want refused", err)
	} else {
		t.Logf("a 6 KiB header list on the API: %v", err)
	}
	bigReq := &wrapperspb.BytesValue{Value: make([]byte, 8<<10)}
	err = cc.Invoke(ctx, method, bigReq, &wrapperspb.BytesValue{})
	if grpcstatus.Code(err) != codes.ResourceExhausted {
		t.Errorf("an 8 KiB API request with max-message-bytes 4096: %v, want ResourceExhausted", err)
	}
	// grpc-go's text reaches the caller; the log names the key, the size
	// and the limit (the line is written when the call ends: wait for it).
	want := fmt.Sprintf("message of %d bytes refused: the receiver's max-message-bytes is 4096", proto.Size(bigReq))
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logged.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the log does not say %q after an 8 KiB API request:\n%s", want, logged.String())
			break
		}
	}
	for _, line := range strings.Split(logged.String(), "\n") {
		if strings.Contains(line, want) {
			t.Logf("the log: %s", line)
		}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.HTTPAddr+"/leader", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Pad", strings.Repeat("a", 12<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 12 KiB header block on the sidecar with max-header-list-bytes 4096: %d, want 431", resp.StatusCode)
	}
}

// lockedLog is a log destination that many goroutines write to.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
