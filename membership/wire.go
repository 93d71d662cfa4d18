package membership

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/hashicorp/memberlist"

	"github.com/electord/electord/election"
)

// wireMeta is what a node gossips about itself (Delegate.NodeMeta): Meta's
// fields, flattened, plus two this package uses internally.
type wireMeta struct {
	Meta
	// Since is when the node's gossip started (Unix nanoseconds), as the node
	// reports it: it settles nothing alone (see claims.go).
	Since int64 `json:"since,omitempty"`
	// Leaving is set just before a clean Leave, so that the others can tell a
	// leave from a death: memberlist v0.7.0 records the difference
	// (StateLeft) but never shows it to NotifyLeave (hashicorp/memberlist#293).
	Leaving bool `json:"leaving,omitempty"`
	// Settings are the cluster-wide settings this node runs with.
	Settings *Settings `json:"settings,omitempty"`
}

func (w wireMeta) encode() []byte {
	b, err := json.Marshal(w)
	if err != nil { // Meta has only strings and integers
		panic(err)
	}
	return b
}

// metaSize is the largest encoding of self's metadata with settings st
// (leaving and a full timestamp included).
func metaSize(self Meta, st Settings) int {
	return len(wireMeta{Meta: self, Since: math.MaxInt64, Leaving: true, Settings: &st}.encode())
}

// decodeMeta reads a node's gossiped metadata and checks that it names the
// node's gossip name.
func decodeMeta(n *memberlist.Node) (wireMeta, error) {
	var w wireMeta
	if len(n.Meta) == 0 {
		return w, errors.New("no metadata")
	}
	if err := json.Unmarshal(n.Meta, &w); err != nil {
		return w, fmt.Errorf("metadata is not valid JSON: %v", err)
	}
	if w.ID == 0 {
		return w, errors.New("metadata has no id")
	}
	if strconv.FormatUint(uint64(w.ID), 10) != n.Name {
		return w, fmt.Errorf("metadata says id %d but the gossip name is %q", w.ID, n.Name)
	}
	return w, nil
}

// nameID is the id a gossip name stands for, or 0.
func nameID(name string) election.NodeID {
	id, _ := strconv.ParseUint(name, 10, 64)
	return election.NodeID(id)
}

// slotOf is the term slot of id: the low election.SlotBits bits.
func slotOf(id election.NodeID) uint64 { return uint64(id) & (1<<election.SlotBits - 1) }

// metaCache remembers the last metadata each gossip name carried, decoded.
// memberlist hands every alive message and every entry of a state sync to
// the delegates (NotifyAlive, NotifyMerge, then NotifyJoin or NotifyUpdate),
// and nearly all of them repeat metadata already seen: while 128 processes
// formed a cluster on 2 cores, decoding the same JSON again and again was a
// tenth of all CPU, and more in the garbage collector. Decoding is a pure
// function of the name and the bytes, so a hit returns what decodeMeta
// returned for them.
type metaCache struct {
	mu      sync.Mutex
	entries map[string]metaEntry // by gossip name
}

type metaEntry struct {
	raw string
	w   wireMeta
	err error
}

// metaCacheMax bounds the names remembered: past it the cache starts over,
// so names that gossip carries and forgets (restarts on new ids, a forger)
// cannot grow it without end.
const metaCacheMax = 4096

// decode is decodeMeta(n), remembered for n's name and metadata.
func (c *metaCache) decode(n *memberlist.Node) (wireMeta, error) {
	c.mu.Lock()
	e, ok := c.entries[n.Name]
	c.mu.Unlock()
	if !ok || e.raw != string(n.Meta) {
		e.raw = string(n.Meta)
		e.w, e.err = decodeMeta(n)
		c.mu.Lock()
		if c.entries == nil || len(c.entries) >= metaCacheMax {
			c.entries = make(map[string]metaEntry)
		}
		c.entries[n.Name] = e
		c.mu.Unlock()
	}
	w := e.w
	if w.Settings != nil {
		st := *w.Settings // each caller gets its own copy
		w.Settings = &st
	}
	return w, e.err
}
