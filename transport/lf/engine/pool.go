package engine

import (
	"sync"

	"golang.org/x/net/http2"
)

// Buffers and Framers are borrowed while a connection is busy and given back
// by Release, so an idle connection holds neither and a busy one does not
// allocate them per event.

// pooledFramer is a Framer whose reader and writer follow the Session that
// borrowed it.
type pooledFramer struct {
	framer *http2.Framer
	io     framerIO
	block  headerBlock // the request header block being decoded
}

type framerIO struct{ s *Session }

func (f *framerIO) Read(p []byte) (int, error) { return f.s.frameReader.Read(p) }

func (f *framerIO) Write(p []byte) (int, error) {
	f.s.out = append(f.s.out, p...)
	return len(p), nil
}

var framers = sync.Pool{New: func() any {
	pooled := &pooledFramer{}
	pooled.framer = http2.NewFramer(&pooled.io, &pooled.io)
	pooled.framer.SetMaxReadFrameSize(maxFrameSize)
	pooled.framer.SetReuseFrames()
	return pooled
}}

// maxPooledOut is the largest output buffer worth keeping for reuse.
const maxPooledOut = 64 << 10

var outBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// grabOut gives the Session an output buffer if it has none.
func (s *Session) grabOut() {
	if s.out == nil {
		s.outPooled = outBufs.Get().(*[]byte)
		s.out = (*s.outPooled)[:0]
	}
}

// releaseOut gives an empty output buffer back.
func (s *Session) releaseOut() {
	if s.outPooled != nil && cap(s.out) <= maxPooledOut {
		*s.outPooled = s.out[:0]
		outBufs.Put(s.outPooled)
	}
	s.out, s.outPooled, s.outOff = nil, nil, 0
}
