package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"sync/atomic"
)

// memberlistLogger turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records at the matching level. Once closing is set (Leave or
// Shutdown began), warnings and errors are logged at debug: a node that is
// going away hears its own sockets close ("use of closed network
// connection") and its peers stop answering, which is no news for an
// operator who stopped it. refutes, if set, counts memberlist's refutations
// of a report that this node is dead or suspect (see Membership.sync).
func memberlistLogger(l *slog.Logger, closing *atomic.Bool, refutes *atomic.Uint64) *log.Logger {
	return log.New(slogWriter{l.With("component", "memberlist"), closing, refutes}, "", 0)
}

type slogWriter struct {
	l       *slog.Logger
	closing *atomic.Bool
	refutes *atomic.Uint64
}

// refuting starts memberlist's warning when it answers a report about this
// node with a higher incarnation ("Refuting a dead message", "Refuting a
// suspect message", "Refuting an alive message" with other metadata;
// TestRestartAfterLeaveIsSeenAtOnce fails if the text changes).
var refuting = []byte("memberlist: Refuting a")

var logLevels = []struct {
	tag   []byte
	level slog.Level
}{
	{[]byte("[DEBUG]"), slog.LevelDebug},
	{[]byte("[INFO]"), slog.LevelInfo},
	{[]byte("[WARN]"), slog.LevelWarn},
	{[]byte("[ERR]"), slog.LevelError},
	{[]byte("[ERROR]"), slog.LevelError},
}

func (w slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, l := range logLevels {
		if bytes.HasPrefix(line, l.tag) {
			level, line = l.level, bytes.TrimSpace(line[len(l.tag):])
			break
		}
	}
	if w.refutes != nil && bytes.HasPrefix(line, refuting) {
		w.refutes.Add(1)
	}
	if level > slog.LevelInfo && w.closing != nil && w.closing.Load() {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		line = bytes.TrimPrefix(line, []byte("memberlist: "))
		w.l.Log(ctx, level, string(line))
	}
	return len(p), nil
}
