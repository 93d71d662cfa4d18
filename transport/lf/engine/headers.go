package engine

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Request header blocks are decoded here, with the Session's own
// hpack.Decoder, instead of by Framer.ReadMetaHeaders. ReadMetaHeaders
// allocates a MetaHeadersFrame and grows a fresh field slice for every
// block: 90% of the bytes the engine allocated per call, and with them most
// of the server's GC work. Here the fields go into a slice kept with the
// pooled Framer, and the checks ReadMetaHeaders makes are made the same way
// (see headerBlock.add).

// headerBlock is the request header block being decoded.
type headerBlock struct {
	id        uint32
	endStream bool
	fields    []hpack.HeaderField
	// What is left of the header list limit (RFC 9113 §6.5.2 sizes), for
	// "trailer" fields and for the rest, as ReadMetaHeaders counts.
	remain, remainTrailer uint32
	truncated             bool  // over Limits.MaxHeaderListBytes: the rest was dropped
	invalid               error // a malformed field: the stream is reset
	selfDep               bool  // the HEADERS frame made the stream depend on itself
	sawRegular            bool
	method, path          string // set by checkPseudos
}

var (
	errPseudoAfterRegular = errors.New("pseudo header field after a regular one")
	errPseudoUnknown      = errors.New("unknown pseudo header field")
	errPseudoDuplicate    = errors.New("duplicate pseudo header field")
	errPseudoMixed        = errors.New("request and response pseudo header fields mixed")
	errFieldName          = errors.New("invalid header field name")
	errFieldValue         = errors.New("invalid header field value")
)

// emit is the Session's hpack emit function: it checks and keeps one
// decoded field, in ReadMetaHeaders' order (validity first, then size).
func (s *Session) emit(hf hpack.HeaderField) {
	b := s.currentBlock()
	if b.invalid != nil || b.truncated {
		return
	}
	if b.invalid = b.check(hf); b.invalid != nil {
		s.headerDec.SetEmitEnabled(false)
		return
	}
	budget, size := &b.remain, hf.Size()
	if hf.Name == "trailer" {
		// ReadMetaHeaders' count: each comma-separated name as a field.
		n := uint32(strings.Count(hf.Value, ",") + 1)
		budget, size = &b.remainTrailer, uint32(len(hf.Value))-n+1+n*hpack.HeaderField{}.Size()
	}
	if size > *budget {
		b.truncated, b.remain, b.remainTrailer = true, 0, 0
		s.headerDec.SetEmitEnabled(false) // keep the HPACK state, skip the strings
		return
	}
	*budget -= size
	b.fields = append(b.fields, hf)
}

// check is what ReadMetaHeaders checks of each field of a request.
func (b *headerBlock) check(hf hpack.HeaderField) error {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		return fmt.Errorf("%w %q for %q", errFieldValue, hf.Value, hf.Name)
	}
	if hf.IsPseudo() {
		if b.sawRegular {
			return fmt.Errorf("%w: %q", errPseudoAfterRegular, hf.Name)
		}
		return nil // which pseudo fields: checkPseudos, once the block is whole
	}
	b.sawRegular = true
	if !httpguts.ValidHeaderFieldName(hf.Name) || strings.ToLower(hf.Name) != hf.Name {
		return fmt.Errorf("%w %q", errFieldName, hf.Name)
	}
	return nil
}

// currentBlock is the block being decoded; it lives in the borrowed Framer so
// that its field slice is reused without staying with an idle connection.
func (s *Session) currentBlock() *headerBlock { return &s.borrowed.block }

// onHeaderFragment takes one HEADERS (first) or CONTINUATION fragment of a
// request header block; the Framer has checked that CONTINUATION frames
// follow their HEADERS. The block is acted on at END_HEADERS.
func (s *Session) onHeaderFragment(id uint32, frag []byte, first, endStream, endHeaders, selfDep bool) error {
	b, done, err := s.decodeFragment(id, frag, first, endStream, endHeaders)
	if first {
		b.selfDep = selfDep
	}
	if err != nil {
		code := http2.ErrCodeCompression
		if errors.Is(err, errHeaderFlood) {
			code = http2.ErrCodeProtocol
		}
		return s.connError(code, fmt.Errorf("%w: %v", ErrProtocol, err))
	}
	if !done {
		return nil
	}
	err = s.onHeaders(b) // an invalid block resets its stream, in whatever state it is
	clear(b.fields)      // drop the strings; keep the array
	return err
}

// errHeaderFlood: a fragment far larger than what the header list limit
// leaves, or more fragments after an invalid field. ReadMetaHeaders closes
// the connection on both without decoding (the CONTINUATION flood defence,
// CVE-2023-45288), and so does the engine.
var errHeaderFlood = errors.New("header block flood")

// decodeFragment decodes one fragment into the current block and reports
// whether the block is complete. An error is fatal to the connection:
// errHeaderFlood, or an HPACK decoding error (the HPACK state is lost).
func (s *Session) decodeFragment(id uint32, frag []byte, first, endStream, endHeaders bool) (*headerBlock, bool, error) {
	b := s.currentBlock()
	if first {
		lim := s.lim.MaxHeaderListBytes
		*b = headerBlock{id: id, endStream: endStream, fields: b.fields[:0], remain: lim, remainTrailer: lim}
		s.headerDec.SetEmitEnabled(true)
		s.headerDec.SetMaxStringLength(int(s.lim.MaxHeaderListBytes))
	}
	if remain := int64(b.remain) + int64(b.remainTrailer); int64(len(frag)) > 2*remain {
		return b, false, fmt.Errorf("%w: a %d-byte fragment with %d bytes of the header list limit left", errHeaderFlood, len(frag), remain)
	}
	if b.invalid != nil {
		return b, false, fmt.Errorf("%w: CONTINUATION after an invalid field (%v)", errHeaderFlood, b.invalid)
	}
	if _, err := s.headerDec.Write(frag); err != nil {
		return b, false, fmt.Errorf("HPACK: %w", err)
	}
	if !endHeaders {
		return b, false, nil
	}
	if err := s.headerDec.Close(); err != nil {
		return b, false, fmt.Errorf("HPACK: %w", err)
	}
	s.headerDec.SetEmitEnabled(true)
	if b.invalid == nil {
		b.invalid = b.checkPseudos()
	}
	return b, true, nil
}

// checkPseudos is ReadMetaHeaders' check of a whole block's pseudo fields:
// known names, no repeats, not request and response ones together. It
// keeps :method and :path for onHeaders.
func (b *headerBlock) checkPseudos() error {
	const status = 1 << 5
	var seen uint
	for _, hf := range b.fields {
		if !hf.IsPseudo() {
			break
		}
		var bit uint
		switch hf.Name {
		case ":method":
			bit = 1 << 0
			b.method = hf.Value
		case ":path":
			bit = 1 << 1
			b.path = hf.Value
		case ":scheme":
			bit = 1 << 2
		case ":authority":
			bit = 1 << 3
		case ":protocol":
			bit = 1 << 4
		case ":status":
			bit = status
		default:
			return fmt.Errorf("%w: %q", errPseudoUnknown, hf.Name)
		}
		if seen&bit != 0 {
			return fmt.Errorf("%w: %q", errPseudoDuplicate, hf.Name)
		}
		seen |= bit
	}
	if seen&status != 0 && seen&^status != 0 {
		return errPseudoMixed
	}
	return nil
}
