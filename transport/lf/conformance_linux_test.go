//go:build linux

package lf

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/electord/electord/transport/lf/engine"
	"github.com/electord/electord/transport/lf/lftest/echo"
)

// h2case is one rule of RFC 9113 as a frame sequence and the answers it
// may get. The table runs against the L/F pool and stock grpc-go side by
// side: L/F must give an RFC answer; grpc-go's answer is recorded (the
// test fails if it changes, so that docs/LF.md stays true).
type h2case struct {
	sec, rule string
	settings  []http2.Setting // the client's first SETTINGS
	send      func(h *h2conn) // queues (and may flush and wait)
	// check, if set, replaces h.outcome() as the answer.
	check func(h *h2conn) string
	want  string // RFC answers, "a | b"
	grpc  string // what grpc-go v1.85 answers
}

const (
	goProto     = "GOAWAY PROTOCOL_ERROR"
	goFrameSize = "GOAWAY FRAME_SIZE_ERROR"
	goFlow      = "GOAWAY FLOW_CONTROL_ERROR"
	goClosed    = "GOAWAY STREAM_CLOSED"
	rstProto    = "RST_STREAM PROTOCOL_ERROR"
	rstClosed   = "RST_STREAM STREAM_CLOSED"
	rstFlow     = "RST_STREAM FLOW_CONTROL_ERROR"
	ignored     = "ignored"
	streamProto = rstProto + " | " + goProto
	closedErr   = rstClosed + " | " + goClosed
)

// open queues HEADERS opening a gRPC call to method on id, without
// END_STREAM.
func open(id uint32, method string) func(h *h2conn) {
	return func(h *h2conn) { h.headers(id, false, grpcFields(method)...) }
}

// halfClosed queues a whole Sleep call (the handler sleeps 300 ms, so the
// stream stays half-closed (remote) meanwhile), then more.
func halfClosed(more func(h *h2conn)) func(h *h2conn) {
	return func(h *h2conn) {
		h.call(1, methodSleep, sleepMsg(300*time.Millisecond))
		more(h)
	}
}

// resetByClient queues HEADERS on stream 1 and the client's RST_STREAM of
// it, then more.
func resetByClient(more func(h *h2conn)) func(h *h2conn) {
	return func(h *h2conn) {
		open(1, methodEcho)(h)
		_ = h.w.WriteRSTStream(1, http2.ErrCodeCancel)
		more(h)
	}
}

// closedNormally makes a whole Echo call on stream 1 and waits for its
// answer, then queues more.
func closedNormally(more func(h *h2conn)) func(h *h2conn) {
	return func(h *h2conn) {
		h.call(1, methodEcho, echoMsg(3))
		h.waitEnd(1)
		more(h)
	}
}

// request queues HEADERS with the given fields (END_STREAM set unless a
// body follows) and body as one DATA frame with END_STREAM.
func request(fields []string, body []byte) func(h *h2conn) {
	return func(h *h2conn) {
		h.headers(1, body == nil, fields...)
		if body != nil {
			_ = h.w.WriteData(1, true, body)
		}
	}
}

// with returns the gRPC call fields with some changed: pairs of name and
// value replace a field of that name, or are added; a value of "-"
// removes it.
func with(changes ...string) []string {
	f := grpcFields(methodEcho)
	for i := 0; i+1 < len(changes); i += 2 {
		name, v := changes[i], changes[i+1]
		found := false
		for j := 0; j+1 < len(f); j += 2 {
			if f[j] == name {
				found = true
				if v == "-" {
					f = append(f[:j:j], f[j+2:]...)
				} else {
					f[j+1] = v
				}
				break
			}
		}
		if !found && v != "-" {
			f = append(f, name, v)
		}
	}
	return f
}

var helloEcho = grpcMsg(echoMsg(3))

func h2cases() []h2case {
	return []h2case{
		{sec: "4.1", rule: "a frame of an unknown type is ignored", send: func(h *h2conn) { h.raw(0x20, 0, 0, []byte("x")) }, want: ignored, grpc: ignored},
		{sec: "4.1", rule: "undefined flags and the reserved bit are ignored", send: func(h *h2conn) { h.raw(http2.FramePing, 0xfe, 1<<31, make([]byte, 8)) }, want: ignored, grpc: ignored},
		{sec: "4.2", rule: "a frame over SETTINGS_MAX_FRAME_SIZE", send: func(h *h2conn) { open(1, methodEcho)(h); h.raw(http2.FrameData, 0, 1, make([]byte, 16385)) }, want: goFrameSize + " | RST_STREAM FRAME_SIZE_ERROR", grpc: "closed"},
		{sec: "4.3", rule: "a header block HPACK cannot decode", send: func(h *h2conn) { h.raw(http2.FrameHeaders, 4|1, 1, []byte{0xff, 0xff, 0xff, 0xff}) }, want: "GOAWAY COMPRESSION_ERROR", grpc: "closed"},
		{sec: "4.3", rule: "a PRIORITY frame inside a header block", send: func(h *h2conn) {
			h.raw(http2.FrameHeaders, 0, 1, h.block(grpcFields(methodEcho)...))
			h.raw(http2.FramePriority, 0, 1, []byte{0, 0, 0, 0, 16})
		}, want: goProto, grpc: "closed"},
		{sec: "5.1", rule: "idle: DATA", send: func(h *h2conn) { h.raw(http2.FrameData, 0, 1, []byte("x")) }, want: goProto, grpc: ignored},
		{sec: "5.1", rule: "idle: RST_STREAM", send: func(h *h2conn) { _ = h.w.WriteRSTStream(1, http2.ErrCodeCancel) }, want: goProto, grpc: ignored},
		{sec: "5.1", rule: "idle: WINDOW_UPDATE", send: func(h *h2conn) { _ = h.w.WriteWindowUpdate(1, 100) }, want: goProto, grpc: ignored},
		{sec: "5.1", rule: "idle: CONTINUATION", send: func(h *h2conn) { h.raw(http2.FrameContinuation, 4, 1, h.block(grpcFields(methodEcho)...)) }, want: goProto, grpc: "closed"},
		{sec: "5.1", rule: "idle: PRIORITY is allowed", send: func(h *h2conn) { h.raw(http2.FramePriority, 0, 3, []byte{0, 0, 0, 0, 16}) }, want: ignored, grpc: ignored},
		{sec: "5.1", rule: "half-closed (remote): DATA", send: halfClosed(func(h *h2conn) { _ = h.w.WriteData(1, false, []byte("x")) }), want: closedErr, grpc: rstClosed},
		{sec: "5.1", rule: "half-closed (remote): HEADERS", send: halfClosed(func(h *h2conn) { h.headers(1, true, "x-trailer", "1") }), want: closedErr, grpc: goProto},
		{sec: "5.1", rule: "half-closed (remote): PRIORITY is allowed", send: halfClosed(func(h *h2conn) { h.raw(http2.FramePriority, 0, 1, []byte{0, 0, 0, 0, 16}) }), want: ignored, grpc: ignored},
		{sec: "5.1", rule: "half-closed (remote): WINDOW_UPDATE is allowed", send: halfClosed(func(h *h2conn) { _ = h.w.WriteWindowUpdate(1, 100) }), want: ignored, grpc: ignored},
		{sec: "5.1", rule: "closed by the client's RST_STREAM: DATA", send: resetByClient(func(h *h2conn) { _ = h.w.WriteData(1, false, []byte("x")) }), want: closedErr, grpc: ignored},
		{sec: "5.1", rule: "closed by the client's RST_STREAM: HEADERS", send: resetByClient(func(h *h2conn) { h.headers(1, true, "x-trailer", "1") }), want: closedErr, grpc: goProto},
		{sec: "5.1", rule: "closed by the client's RST_STREAM: CONTINUATION", send: resetByClient(func(h *h2conn) { h.raw(http2.FrameContinuation, 4, 1, h.block("x", "y")) }), want: goProto + " | " + closedErr, grpc: "closed"},
		{sec: "5.1", rule: "closed by the client's RST_STREAM: PRIORITY is allowed", send: resetByClient(func(h *h2conn) { h.raw(http2.FramePriority, 0, 1, []byte{0, 0, 0, 0, 16}) }), want: ignored, grpc: ignored},
		{sec: "5.1", rule: "closed (both ends sent END_STREAM): DATA", send: closedNormally(func(h *h2conn) { _ = h.w.WriteData(1, false, []byte("x")) }), want: closedErr, grpc: ignored},
		{sec: "5.1", rule: "closed (both ends sent END_STREAM): HEADERS", send: closedNormally(func(h *h2conn) { h.headers(1, true, grpcFields(methodEcho)...) }), want: closedErr, grpc: goProto},
		{sec: "5.1", rule: "closed (both ends sent END_STREAM): CONTINUATION", send: closedNormally(func(h *h2conn) { h.raw(http2.FrameContinuation, 4, 1, h.block("x", "y")) }), want: goProto + " | " + closedErr, grpc: "closed"},
		{sec: "5.1", rule: "closed: WINDOW_UPDATE and RST_STREAM are ignored", send: closedNormally(func(h *h2conn) {
			_ = h.w.WriteWindowUpdate(1, 100)
			_ = h.w.WriteRSTStream(1, http2.ErrCodeCancel)
		}), want: ignored, grpc: ignored},
		{sec: "5.1", rule: "closed: PRIORITY is allowed", send: closedNormally(func(h *h2conn) { h.raw(http2.FramePriority, 0, 1, []byte{0, 0, 0, 0, 16}) }), want: ignored, grpc: ignored},
		{sec: "5.1.1", rule: "HEADERS on an even stream", send: func(h *h2conn) { h.headers(2, true, grpcFields(methodEcho)...) }, want: goProto, grpc: goProto},
		{sec: "5.1.1", rule: "HEADERS on a stream lower than one opened (5 then 3)", send: func(h *h2conn) { open(5, methodEcho)(h); open(3, methodEcho)(h) }, want: goProto, grpc: goProto},
		{sec: "5.1.2", rule: "more streams than SETTINGS_MAX_CONCURRENT_STREAMS (4)", send: func(h *h2conn) {
			for id := uint32(1); id <= 9; id += 2 {
				open(id, methodEcho)(h)
			}
		}, want: "RST_STREAM REFUSED_STREAM | " + streamProto, grpc: "RST_STREAM REFUSED_STREAM"},
		{sec: "5.3.1", rule: "HEADERS that make a stream depend on itself", send: func(h *h2conn) {
			_ = h.w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block(grpcFields(methodEcho)...), EndHeaders: true, Priority: http2.PriorityParam{StreamDep: 1, Weight: 16}})
		}, want: streamProto, grpc: ignored},
		{sec: "5.3.1", rule: "PRIORITY that makes a stream depend on itself", send: func(h *h2conn) { h.raw(http2.FramePriority, 0, 1, []byte{0, 0, 0, 1, 16}) }, want: streamProto, grpc: ignored},
		{sec: "5.5", rule: "an unknown frame type inside a header block", send: func(h *h2conn) {
			h.raw(http2.FrameHeaders, 0, 1, h.block(grpcFields(methodEcho)...))
			h.raw(0x20, 0, 1, []byte("x"))
		}, want: goProto, grpc: "closed"},
		{sec: "6.1", rule: "DATA on stream 0", send: func(h *h2conn) { h.raw(http2.FrameData, 0, 0, []byte("x")) }, want: goProto, grpc: "closed"},
		{sec: "6.1", rule: "DATA whose padding is longer than the payload", send: func(h *h2conn) { open(1, methodEcho)(h); h.raw(http2.FrameData, 8, 1, []byte{5, 'x'}) }, want: goProto, grpc: "closed"},
		{sec: "6.2", rule: "HEADERS followed by DATA before END_HEADERS", send: func(h *h2conn) {
			h.raw(http2.FrameHeaders, 0, 1, h.block(grpcFields(methodEcho)...))
			h.raw(http2.FrameData, 0, 1, []byte("x"))
		}, want: goProto, grpc: "closed"},
		{sec: "6.2", rule: "CONTINUATION of another stream inside a header block", send: func(h *h2conn) {
			h.raw(http2.FrameHeaders, 0, 1, h.block(grpcFields(methodEcho)...))
			h.raw(http2.FrameContinuation, 4, 3, nil)
		}, want: goProto, grpc: "closed"},
		{sec: "6.2", rule: "HEADERS on stream 0", send: func(h *h2conn) { h.raw(http2.FrameHeaders, 4|1, 0, h.block(grpcFields(methodEcho)...)) }, want: goProto, grpc: "closed"},
		{sec: "6.2", rule: "HEADERS whose padding is longer than the payload", send: func(h *h2conn) { h.raw(http2.FrameHeaders, 8|4|1, 1, []byte{9, 0x82}) }, want: goProto, grpc: rstProto},
		{sec: "6.3", rule: "PRIORITY on stream 0", send: func(h *h2conn) { h.raw(http2.FramePriority, 0, 0, []byte{0, 0, 0, 1, 16}) }, want: goProto, grpc: "closed"},
		{sec: "6.3", rule: "PRIORITY of 4 bytes (a stream error)", send: func(h *h2conn) { h.raw(http2.FramePriority, 0, 1, []byte{0, 0, 0, 3}) }, want: "RST_STREAM FRAME_SIZE_ERROR", grpc: "closed"},
		{sec: "6.4", rule: "RST_STREAM on stream 0", send: func(h *h2conn) { h.raw(http2.FrameRSTStream, 0, 0, u32(8)) }, want: goProto, grpc: "closed"},
		{sec: "6.4", rule: "RST_STREAM of 3 bytes", send: func(h *h2conn) { open(1, methodEcho)(h); h.raw(http2.FrameRSTStream, 0, 1, []byte{0, 0, 8}) }, want: goFrameSize, grpc: "closed"},
		{sec: "6.5", rule: "SETTINGS ACK with a payload", send: func(h *h2conn) { h.raw(http2.FrameSettings, 1, 0, setting(http2.SettingEnablePush, 0)) }, want: goFrameSize, grpc: "closed"},
		{sec: "6.5", rule: "SETTINGS on stream 1", send: func(h *h2conn) { h.raw(http2.FrameSettings, 0, 1, setting(http2.SettingEnablePush, 0)) }, want: goProto, grpc: "closed"},
		{sec: "6.5", rule: "SETTINGS of 3 bytes", send: func(h *h2conn) { h.raw(http2.FrameSettings, 0, 0, []byte{0, 2, 0}) }, want: goFrameSize, grpc: "closed"},
		{sec: "6.5.2", rule: "SETTINGS_ENABLE_PUSH of 2", send: func(h *h2conn) { h.raw(http2.FrameSettings, 0, 0, setting(http2.SettingEnablePush, 2)) }, want: goProto, grpc: ignored},
		{sec: "6.5.2", rule: "SETTINGS_INITIAL_WINDOW_SIZE of 2^31", send: func(h *h2conn) { h.raw(http2.FrameSettings, 0, 0, setting(http2.SettingInitialWindowSize, 1<<31)) }, want: goFlow, grpc: "closed"},
		{sec: "6.5.2", rule: "SETTINGS_MAX_FRAME_SIZE of 16,383", send: func(h *h2conn) { h.raw(http2.FrameSettings, 0, 0, setting(http2.SettingMaxFrameSize, 16383)) }, want: goProto, grpc: ignored},
		{sec: "6.5.2", rule: "an unknown setting is ignored", send: func(h *h2conn) { h.raw(http2.FrameSettings, 0, 0, setting(0xff, 1)) }, want: ignored, grpc: ignored},
		{sec: "6.7", rule: "PING on stream 1", send: func(h *h2conn) { h.raw(http2.FramePing, 0, 1, make([]byte, 8)) }, want: goProto, grpc: "closed"},
		{sec: "6.7", rule: "PING of 7 bytes", send: func(h *h2conn) { h.raw(http2.FramePing, 0, 0, make([]byte, 7)) }, want: goFrameSize, grpc: "closed"},
		{sec: "6.8", rule: "GOAWAY on stream 1", send: func(h *h2conn) { h.raw(http2.FrameGoAway, 0, 1, make([]byte, 8)) }, want: goProto, grpc: "closed"},
		{sec: "6.9", rule: "WINDOW_UPDATE of 0 on the connection", send: func(h *h2conn) { h.raw(http2.FrameWindowUpdate, 0, 0, u32(0)) }, want: goProto, grpc: "closed"},
		{sec: "6.9", rule: "WINDOW_UPDATE of 0 on an open stream", send: func(h *h2conn) { open(1, methodEcho)(h); h.raw(http2.FrameWindowUpdate, 0, 1, u32(0)) }, want: streamProto, grpc: rstProto},
		{sec: "6.9", rule: "WINDOW_UPDATE of 3 bytes", send: func(h *h2conn) { h.raw(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 1}) }, want: goFrameSize, grpc: "closed"},
		{sec: "6.9.1", rule: "WINDOW_UPDATE taking the connection window over 2^31-1", send: func(h *h2conn) {
			_ = h.w.WriteWindowUpdate(0, 1<<31-1)
		}, want: goFlow, grpc: ignored},
		{sec: "6.9.1", rule: "WINDOW_UPDATE taking a stream window over 2^31-1", send: func(h *h2conn) {
			open(1, methodEcho)(h)
			_ = h.w.WriteWindowUpdate(1, 1<<31-1)
		}, want: rstFlow + " | " + goFlow, grpc: ignored},
		{sec: "6.9.1", rule: "DATA beyond the stream window the server advertised", send: func(h *h2conn) {
			open(1, methodEcho)(h)
			// A message that fills the window exactly, then one byte more.
			n := int(h.initWindow) + 1
			_ = h.w.WriteData(1, false, grpcMsg(make([]byte, h.initWindow-5))[:16384])
			for n -= 16384; n > 0; n -= 16384 {
				_ = h.w.WriteData(1, false, make([]byte, min(n, 16384)))
			}
		}, want: rstFlow + " | " + goFlow,
			// grpc-go's answer depends on timing: if it read the message
			// and sent WINDOW_UPDATE before the extra byte arrived, the
			// byte fits (seen once in CI under load).
			grpc: rstFlow + " | " + ignored},
		{sec: "6.9.2", rule: "a new SETTINGS_INITIAL_WINDOW_SIZE applies to open streams", settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}, send: func(h *h2conn) {
			h.call(1, methodEcho, echoMsg(100))
		}, check: func(h *h2conn) string {
			if n := h.dataAfter(1, 300*time.Millisecond); n != 0 {
				return "sent DATA into a window of 0"
			}
			_ = h.w.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
			if n := h.dataAfter(1, 500*time.Millisecond); n != 10 {
				return "sent " + strconv.Itoa(n) + " bytes into a window of 10"
			}
			return "10 bytes"
		}, want: "10 bytes", grpc: "10 bytes"},
		{sec: "6.9.2", rule: "a SETTINGS_INITIAL_WINDOW_SIZE that makes a window negative", settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 100}}, send: func(h *h2conn) {
			h.call(1, methodEcho, echoMsg(300))
		}, check: func(h *h2conn) string {
			if n := h.dataAfter(1, 300*time.Millisecond); n != 100 {
				return "sent " + strconv.Itoa(n) + " bytes into a window of 100"
			}
			_ = h.w.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 50}) // window -50
			_ = h.w.WriteWindowUpdate(1, 60)                                                  // window 10
			if n := h.dataAfter(1, 500*time.Millisecond); n != 10 {
				return "sent " + strconv.Itoa(n) + " bytes into a window of -50+60"
			}
			return "10 bytes"
		}, want: "10 bytes", grpc: "10 bytes"},
		{sec: "6.9.2", rule: "SETTINGS_INITIAL_WINDOW_SIZE taking a stream window over 2^31-1", send: func(h *h2conn) {
			open(1, methodEcho)(h)
			_ = h.w.WriteWindowUpdate(1, 1<<31-1-65535)
			h.raw(http2.FrameSettings, 0, 0, setting(http2.SettingInitialWindowSize, 65536))
		}, want: goFlow, grpc: ignored},
		{sec: "6.10", rule: "CONTINUATION after HEADERS with END_HEADERS", send: func(h *h2conn) {
			open(1, methodEcho)(h)
			h.raw(http2.FrameContinuation, 4, 1, h.block("x", "y"))
		}, want: goProto, grpc: "closed"},
		{sec: "6.10", rule: "CONTINUATION after CONTINUATION with END_HEADERS", send: func(h *h2conn) {
			b := h.block(grpcFields(methodEcho)...)
			h.raw(http2.FrameHeaders, 0, 1, b[:2])
			h.raw(http2.FrameContinuation, 4, 1, b[2:])
			h.raw(http2.FrameContinuation, 4, 1, h.block("x", "y"))
		}, want: goProto, grpc: "closed"},
		{sec: "6.10", rule: "CONTINUATION after DATA", send: func(h *h2conn) {
			open(1, methodEcho)(h)
			_ = h.w.WriteData(1, false, []byte("x"))
			h.raw(http2.FrameContinuation, 4, 1, h.block("x", "y"))
		}, want: goProto, grpc: "closed"},
		{sec: "6.10", rule: "CONTINUATION on stream 0", send: func(h *h2conn) { h.raw(http2.FrameContinuation, 4, 0, nil) }, want: goProto, grpc: "closed"},
		{sec: "8.1", rule: "a second HEADERS without END_STREAM", send: func(h *h2conn) { open(1, methodEcho)(h); h.headers(1, false, "x-trailer", "1") }, want: streamProto, grpc: goProto},
		{sec: "8.1", rule: "trailers with a pseudo field", send: func(h *h2conn) { open(1, methodEcho)(h); h.headers(1, true, ":method", "POST") }, want: streamProto, grpc: goProto},
		{sec: "8.1.1", rule: "content-length larger than the DATA", send: request(with("content-length", "100"), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.1.1", rule: "content-length smaller than the DATA", send: request(with("content-length", "1"), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.1.1", rule: "content-length that is no number", send: request(with("content-length", "x"), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.2.1", rule: "an upper-case field name", send: request(with("X-Upper", "1"), helloEcho), want: streamProto, grpc: rstProto},
		{sec: "8.2.1", rule: "a field value with trailing white space", send: request(with("x-space", "v "), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.2.2", rule: "a connection-specific field (connection)", send: request(with("connection", "keep-alive"), helloEcho), want: streamProto, grpc: rstProto},
		{sec: "8.2.2", rule: "a connection-specific field (transfer-encoding)", send: request(with("transfer-encoding", "chunked"), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.2.2", rule: "te other than trailers", send: request(with("te", "gzip"), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.3", rule: "an unknown pseudo field", send: request(append([]string{":foo", "x"}, grpcFields(methodEcho)...), helloEcho), want: streamProto, grpc: rstProto},
		{sec: "8.3", rule: "a response pseudo field in a request", send: request(append([]string{":status", "200"}, grpcFields(methodEcho)...), helloEcho), want: streamProto, grpc: rstProto},
		{sec: "8.3", rule: "a pseudo field after a regular one", send: request(append(grpcFields(methodEcho), ":scheme", "http"), helloEcho), want: streamProto, grpc: rstProto},
		{sec: "8.3", rule: "a repeated :path", send: request(append([]string{":path", methodEcho}, grpcFields(methodEcho)...), helloEcho), want: streamProto, grpc: rstProto},
		{sec: "8.3.1", rule: "no :method", send: request(with(":method", "-"), helloEcho), want: streamProto, grpc: "response 405"},
		{sec: "8.3.1", rule: "no :scheme", send: request(with(":scheme", "-"), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.3.1", rule: "no :path", send: request(with(":path", "-"), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.3.1", rule: "an empty :path", send: request(with(":path", ""), helloEcho), want: streamProto, grpc: ignored},
		{sec: "8.4", rule: "PUSH_PROMISE from a client", send: func(h *h2conn) {
			open(1, methodEcho)(h)
			h.raw(http2.FramePushPromise, 4, 1, append(u32(2), h.block(grpcFields(methodEcho)...)...))
		}, want: goProto, grpc: ignored},
		{sec: "gRPC", rule: "GET / (no gRPC): a complete answer", send: request([]string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "lf"}, nil), want: "response 415", grpc: "response 415"},
		{sec: "gRPC", rule: "HEAD / (no gRPC): a complete answer", send: request([]string{":method", "HEAD", ":scheme", "http", ":path", "/", ":authority", "lf"}, nil), want: "response 415", grpc: "response 415"},
		{sec: "gRPC", rule: "POST of text/plain: a complete answer", send: request(with("content-type", "text/plain"), []byte("hello")), want: "response 415", grpc: "response 415"},
		{sec: "gRPC", rule: "GET of a gRPC method", send: request(with(":method", "GET"), nil), want: "response 405", grpc: "response 405"},
		{sec: "gRPC", rule: "no :authority and no host", send: request(with(":authority", "-"), helloEcho), want: "response 400", grpc: "response 400"},
	}
}

// startGRPC starts stock grpc-go with the echo service and the same
// stream limit, on loopback.
func startGRPC(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	gs := grpc.NewServer(opts...)
	echo.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// TestConformance runs the table against the L/F pool and grpc-go. With
// -v it prints the table of docs/LF.md.
func TestConformance(t *testing.T) {
	lfs := start(t, Config{Workers: 2, Limits: engine.Limits{MaxConcurrentStreams: 4}}, nil)
	gaddr := startGRPC(t, grpc.MaxConcurrentStreams(4))
	rows := []string{mdRow("§", "rule", "RFC 9113 answer", "L/F", "grpc-go "+"v1.85")}
	lfOK, grpcOK, n := 0, 0, 0
	for _, c := range h2cases() {
		n++
		answer := func(addr string) (string, bool) {
			h := dialH2(t, addr, c.settings...)
			c.send(h)
			if c.check != nil {
				return c.check(h), false
			}
			return h.outcome(), h.leftOpen
		}
		gotLF, lfOpen := answer(lfs.addr)
		gotGRPC, _ := answer(gaddr)
		if oneOf(gotLF, c.want) && !lfOpen {
			lfOK++
		} else {
			t.Errorf("§%s %s: L/F answered %q (left open: %v), want %q", c.sec, c.rule, gotLF, lfOpen, c.want)
		}
		// RFC 9113 §5.4.1: an endpoint SHOULD send GOAWAY before it
		// closes for a connection error; closing alone is allowed.
		grpcFine := oneOf(gotGRPC, c.want) || (gotGRPC == "closed" && strings.Contains(c.want, "GOAWAY"))
		if grpcFine {
			grpcOK++
		}
		if !oneOf(gotGRPC, c.grpc) {
			t.Errorf("§%s %s: grpc-go answered %q; the table says %q", c.sec, c.rule, gotGRPC, c.grpc)
		}
		grpcCell := gotGRPC
		switch {
		case !grpcFine:
			grpcCell = "**" + gotGRPC + "** (deviates)"
		case gotGRPC == "closed":
			grpcCell = "closed, no GOAWAY"
		}
		rows = append(rows, mdRow(c.sec, c.rule, strings.ReplaceAll(c.want, " | ", " or "), gotLF, grpcCell))
	}
	t.Logf("%d rules: L/F gives the RFC answer to %d, grpc-go to %d\n%s", n, lfOK, grpcOK, strings.Join(rows, "\n"))
}

// TestPlainHTTP2Client: an ordinary HTTP/2 client (x/net's Transport over
// cleartext) asking GET / and HEAD / gets a complete answer at once from
// both servers: grpc-go's 415.
func TestPlainHTTP2Client(t *testing.T) {
	lfs := start(t, Config{Workers: 2}, nil)
	gaddr := startGRPC(t)
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for _, addr := range []string{lfs.addr, gaddr} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, "http://"+addr+"/", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, addr, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s: status %d, want 415", method, addr, resp.StatusCode)
			}
		}
	}
}
