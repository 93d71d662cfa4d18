package engine

import (
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/status"
)

// idRange is a range of stream ids, both ends included.
type idRange struct{ lo, hi uint32 }

// streamHistory is what a Session remembers of its streams beyond the open ones;
// most connections never need it (made on first use, so that an idle
// Session stays small).
type streamHistory struct {
	waiting  []uint32  // streams waiting for window (widen)
	resets   []uint32  // the last streams we reset (ring of resetMemory)
	resetPos int       // next slot in resets
	skips    []idRange // the last ranges of skipped stream ids
}

// ensureHistory returns the Session's history, making it if need be.
func (s *Session) ensureHistory() *streamHistory {
	if s.history == nil {
		s.history = &streamHistory{}
	}
	return s.history
}

type stream struct {
	id          uint32
	call        *Call // &callBuf once the headers named a known method
	callBuf     Call
	body        []byte
	bodyInline  [128]byte // the body of a small request
	recvUnacked int       // discarded bytes whose stream credit is not yet returned
	endRecv     bool
	answered    bool // the response is being written; more input is dropped
	out         bool // the call is queued for TakeCalls or taken, and not back yet

	// Receiving (RFC 9113 §6.9, §8.1.1).
	recvWindow int64 // what the client may still send on the stream
	reserved   int64 // this stream's share of Session.reserved
	charged    int64 // bytes taken from Limits.Shared for body
	waiting    bool  // in Session.waiting: needs window the buffers lack
	contentLen int64 // the content-length header, -1 if none
	dataLen    int64 // DATA payload received (padding excluded)
	// early, if set, is the answer of a request that is not a gRPC call
	// (wrong content-type or method, no authority), with its HTTP status:
	// sent once the request ended, its data dropped meanwhile.
	early      *status.Status
	httpStatus int

	sendWindow int64
	pending    []byte // response DATA not yet written
	trailer    []hpack.HeaderField
}

// idle reports whether stream id is idle: never opened by the client (an
// id above the last it opened), or an even id, which only the server could
// open and never does.
func (s *Session) idle(id uint32) bool {
	return id%2 == 0 || id > s.lastStream
}

// openID records id as the client's newest stream; the ids it skipped are
// closed from now on (RFC 9113 §5.1.1) and remembered as never opened.
func (s *Session) openID(id uint32) {
	if id > s.lastStream+2 {
		r := idRange{s.lastStream + 2, id - 2}
		if s.lastStream == 0 {
			r.lo = 1
		}
		hist := s.ensureHistory()
		if len(hist.skips) == skipMemory {
			copy(hist.skips, hist.skips[1:])
			hist.skips = hist.skips[:skipMemory-1]
		}
		hist.skips = append(hist.skips, r)
	}
	s.lastStream = id
}

// skipped reports whether the closed stream id was never opened.
func (s *Session) skipped(id uint32) bool {
	if s.history == nil {
		return false
	}
	for _, r := range s.history.skips {
		if id >= r.lo && id <= r.hi {
			return true
		}
	}
	return false
}

// resetByUs reports whether we reset stream id lately: frames the client
// sent before it saw the reset are ignored (§5.1, closed).
func (s *Session) resetByUs(id uint32) bool {
	if s.history == nil {
		return false
	}
	for _, r := range s.history.resets {
		if r == id {
			return true
		}
	}
	return false
}

// newStream opens stream id with the initial receive window.
func (s *Session) newStream(id uint32, endStream bool) *stream {
	strm := streams.Get().(*stream)
	strm.id, strm.sendWindow, strm.endRecv = id, s.peerInitWindow, endStream
	strm.contentLen = -1
	if !endStream {
		w := int64(s.lim.StreamWindow)
		if !s.settingsAcked {
			w = max(w, initialPeerWindow)
		}
		strm.recvWindow = w
		s.setReserved(strm, w)
	}
	if s.streams == nil {
		s.streams = make(map[uint32]*stream)
	}
	s.streams[id] = strm
	return strm
}

// streams are reused across calls and connections: a stream, with its
// Call and their inline buffers, is most of what a call would otherwise
// allocate, and the garbage collector's work to reclaim it would come out
// of the pool's CPU.
var streams = sync.Pool{New: func() any { return new(stream) }}

// streamReset answers a stream-level error: RST_STREAM and forget it.
func (s *Session) streamReset(id uint32, code http2.ErrCode) {
	s.drop(id)
	s.sendReset(id, code)
}

// sendReset sends RST_STREAM and remembers that we reset the stream.
func (s *Session) sendReset(id uint32, code http2.ErrCode) {
	_ = s.framer().WriteRSTStream(id, code)
	hist := s.ensureHistory()
	if hist.resets == nil {
		hist.resets = make([]uint32, 0, resetMemory)
	}
	if len(hist.resets) < resetMemory {
		hist.resets = append(hist.resets, id)
	} else {
		hist.resets[hist.resetPos] = id
		hist.resetPos = (hist.resetPos + 1) % resetMemory
	}
}

// drop forgets stream id (the client reset it, or it failed); a call of it
// that is running is cancelled where CancelOnReset allows.
func (s *Session) drop(id uint32) {
	strm := s.streams[id]
	if strm == nil {
		return
	}
	if strm.call != nil && strm.call.cancelable {
		strm.call.abort()
	}
	delete(s.streams, id)
	s.release(strm)
	s.retryWaiting()
}
