package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/electord/electord/node"
)

// DecidedHeader names the response header of the leader answers (/leader,
// /leader/self and their /elections/{name} forms) that says when the
// answer was decided: "FROM-TO", two instants of this node's wall clock in
// Unix nanoseconds. The node read its leadership (in quorum mode, checked
// its lease) at some instant between them; the window is the time of that
// read alone, not of the request, so it is usually a microsecond or two.
// A 200 from /leader/self means this node held the leadership at that
// instant. Observers that share the node's clock (processes on one host)
// can order the answers of different nodes by it, which the round trip of
// a request cannot do.
const DecidedHeader = "Electord-Decided"

// decided calls read, sets DecidedHeader on w to the instants just before
// and just after, and returns what read returned.
func decided(w http.ResponseWriter, read func() node.LeaderInfo) node.LeaderInfo {
	from := time.Now().UnixNano()
	li := read()
	to := time.Now().UnixNano()
	b := make([]byte, 0, 40)
	b = strconv.AppendInt(b, from, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, to, 10)
	w.Header()[DecidedHeader] = []string{string(b)}
	return li
}

// ParseDecided reads a DecidedHeader value: the window within which the
// answer was decided. ok is false when v is not of that form.
func ParseDecided(v string) (from, to time.Time, ok bool) {
	a, b, found := strings.Cut(v, "-")
	if !found {
		return time.Time{}, time.Time{}, false
	}
	f, err1 := strconv.ParseInt(a, 10, 64)
	t, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || f <= 0 || t < f {
		return time.Time{}, time.Time{}, false
	}
	return time.Unix(0, f), time.Unix(0, t), true
}
