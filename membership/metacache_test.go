package membership

import (
	"strconv"
	"testing"

	"github.com/hashicorp/memberlist"
)

// The metadata cache answers what decodeMeta answers for the same name and
// bytes: a hit, a change of metadata, an error, and a name whose id the
// metadata does not match; each caller gets its own copy of the settings.
func TestMetaCacheAnswersAsDecodeMeta(t *testing.T) {
	var c metaCache
	st := Settings{Algorithm: "ring"}
	enc := func(peer string) []byte {
		return wireMeta{Meta: Meta{ID: 7, Name: "n", PeerAddr: peer}, Since: 1, Settings: &st}.encode()
	}
	nodes := []*memberlist.Node{
		{Name: "7", Meta: enc("a:1")},
		{Name: "7", Meta: enc("a:1")}, // the same again: a hit
		{Name: "7", Meta: enc("b:2")}, // new metadata
		{Name: "8", Meta: enc("b:2")}, // names another id
		{Name: "7", Meta: []byte("{not json")},
		{Name: "7", Meta: []byte("{not json")},
		{Name: "7"},
		{Name: "7", Meta: enc("a:1")},
	}
	for i, n := range nodes {
		want, wantErr := decodeMeta(n)
		got, err := c.decode(n)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("node %d: error %v, want %v", i, err, wantErr)
		}
		if got.Meta != want.Meta || got.Since != want.Since || (got.Settings == nil) != (want.Settings == nil) ||
			(got.Settings != nil && *got.Settings != *want.Settings) {
			t.Fatalf("node %d: %+v, want %+v", i, got, want)
		}
	}
	a, _ := c.decode(nodes[0])
	a.Settings.Algorithm = "bully"
	if b, _ := c.decode(nodes[0]); b.Settings.Algorithm != "ring" {
		t.Fatalf("a caller's change of the settings reached the cache: %+v", b.Settings)
	}
}

// The cache remembers at most metaCacheMax names.
func TestMetaCacheIsBounded(t *testing.T) {
	var c metaCache
	for i := range metaCacheMax + 10 {
		id := uint64(i + 1)
		c.decode(&memberlist.Node{Name: strconv.FormatUint(id, 10), Meta: wireMeta{Meta: Meta{ID: 0}}.encode()})
	}
	if n := len(c.entries); n > metaCacheMax {
		t.Fatalf("%d names remembered, at most %d allowed", n, metaCacheMax)
	}
}
