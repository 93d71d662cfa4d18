package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// memberlistLogger turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records at the matching level.
func memberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l.With("component", "memberlist")}, "", 0)
}

type slogWriter struct{ l *slog.Logger }

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
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		line = bytes.TrimPrefix(line, []byte("memberlist: "))
		w.l.Log(ctx, level, string(line))
	}
	return len(p), nil
}
