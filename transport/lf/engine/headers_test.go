package engine

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// refDecode decodes block (split into fragments of at most split bytes) the
// way the table first asked for: Framer.ReadMetaHeaders.
func refDecode(t *testing.T, blocks [][]byte, limit uint32, split int) (*http2.MetaHeadersFrame, error) {
	t.Helper()
	var b bytes.Buffer
	w := http2.NewFramer(&b, nil)
	r := http2.NewFramer(nil, &b)
	r.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.MaxHeaderListSize = limit
	var mh *http2.MetaHeadersFrame
	var err error
	for i, block := range blocks {
		b.Reset()
		writeBlock(w, uint32(2*i+1), block, split)
		var f http2.Frame
		f, err = r.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue // the stream is reset; the connection goes on
			}
			return nil, err
		}
		mh = f.(*http2.MetaHeadersFrame)
	}
	return mh, err
}

func writeBlock(w *http2.Framer, id uint32, block []byte, split int) {
	first := block[:min(len(block), split)]
	rest := block[len(first):]
	_ = w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(rest) == 0, EndStream: true})
	for len(rest) > 0 {
		n := min(len(rest), split)
		_ = w.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

// ourDecode decodes the same blocks with the Session's decoder.
func ourDecode(blocks [][]byte, limit uint32, split int) (*headerBlock, error) {
	s := &Session{lim: Limits{MaxHeaderListBytes: limit}, borrowed: &pooledFramer{}}
	s.headerDec = hpack.NewDecoder(4096, s.emit)
	var b *headerBlock
	for i, block := range blocks {
		for off := 0; off == 0 || off < len(block); off += split {
			frag := block[off:min(len(block), off+split)]
			var err error
			b, _, err = s.decodeFragment(uint32(2*i+1), frag, off == 0, true, off+split >= len(block))
			if err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// FuzzHeaderBlock checks the engine's request header decoding against
// Framer.ReadMetaHeaders, which it replaced: for any two header blocks on
// one connection (the second sees the first's dynamic table), split into
// any fragment size, both reject the connection alike, reset the stream
// alike, and otherwise keep the same fields and the same truncation.
func FuzzHeaderBlock(f *testing.F) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(fields ...hpack.HeaderField) []byte {
		hb.Reset()
		for _, hf := range fields {
			_ = enc.WriteField(hf)
		}
		return bytes.Clone(hb.Bytes())
	}
	req := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: "/a.B/C"},
		{Name: ":authority", Value: "x"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "grpc-timeout", Value: "1S"}, {Name: "k-bin", Value: "AAEC"}}
	f.Add(block(req...), block(req...), uint16(64), uint8(7))
	f.Add(block(req[0], req[2], req[4]), block(req[1], req[3]), uint16(100), uint8(3))
	f.Add(block(hpack.HeaderField{Name: "Upper", Value: "v"}), block(req...), uint16(1024), uint8(0))
	f.Add(block(req[4], req[0]), block(hpack.HeaderField{Name: ":bogus", Value: "1"}), uint16(1024), uint8(5))
	f.Add(block(req[0], req[0]), block(hpack.HeaderField{Name: "k", Value: "a\r\nb"}), uint16(1024), uint8(5))
	f.Add(block(hpack.HeaderField{Name: ":status", Value: "200"}), []byte{0xff, 0xff}, uint16(1024), uint8(5))
	f.Fuzz(func(t *testing.T, b1, b2 []byte, limit uint16, split uint8) {
		if len(b1)+len(b2) > 4096 {
			// A long field split into 1-byte fragments costs the HPACK
			// decoder quadratic time (it re-parses the saved partial field
			// on every Write), in both decoders alike; keep executions fast.
			return
		}
		lim, sp := uint32(limit)+1, int(split)+1
		blocks := [][]byte{b1, b2}
		ref, refErr := refDecode(t, blocks, lim, sp)
		ours, ourErr := ourDecode(blocks, lim, sp)
		if (refErr == nil) != (ourErr == nil) {
			var se http2.StreamError
			if !(errors.As(refErr, &se) && ourErr == nil && ours.invalid != nil) {
				t.Fatalf("ReadMetaHeaders: %v; engine: %v (invalid %v)", refErr, ourErr, ours)
			}
			return // both reset the last stream
		}
		if refErr != nil {
			// Both fail the connection, with the same code.
			var ce http2.ConnectionError
			if !errors.As(refErr, &ce) {
				t.Fatalf("ReadMetaHeaders: unexpected error %v", refErr)
			}
			if wantFlood := http2.ErrCode(ce) == http2.ErrCodeProtocol; wantFlood != errors.Is(ourErr, errHeaderFlood) {
				t.Fatalf("ReadMetaHeaders: %v; engine: %v", refErr, ourErr)
			}
			return
		}
		if ours.invalid != nil {
			t.Fatalf("engine reset the stream (%v); ReadMetaHeaders kept %v", ours.invalid, ref.Fields)
		}
		if ref.Truncated != ours.truncated {
			t.Fatalf("truncated: ReadMetaHeaders %v, engine %v", ref.Truncated, ours.truncated)
		}
		if !slices.Equal(ref.Fields, ours.fields) {
			t.Fatalf("fields differ:\nReadMetaHeaders %v\nengine          %v", ref.Fields, ours.fields)
		}
	})
}
