package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// ListPoller observes many named elections at once: it asks each node for
// its list of elections (GET /elections, a page of up to 1,000 at a time)
// and records, for every election it has a Recorder of, the answers its
// /leader and /leader/self would have given, both decided within the
// list request's [Sent, Recv]. Polling each election's own paths costs two
// requests per election and node per round; at a thousand elections the
// observer would load the nodes more than the faults do.
//
// An election missing from a node's list has no leader there (the node
// knows no candidate of it): both answers are 503, as the node's own paths
// give them.
type ListPoller struct {
	Client  *http.Client
	URLs    map[int]string // node id -> base URL ("http://host:port")
	Period  time.Duration  // pause between two rounds of one node; 0 = 200ms
	Timeout time.Duration  // per request; 0 = 2s
	Recs    map[string]*Recorder
	Prefix  string // the elections' common prefix, asked for as ?prefix=
}

// listPage is the part of GET /elections that the poller reads.
type listPage struct {
	Elections []struct {
		Election string `json:"election"`
		Leader   body   `json:"leader"`
	} `json:"elections"`
	Next string `json:"next"`
}

// Run polls until ctx ends.
func (p *ListPoller) Run(ctx context.Context) {
	period, timeout := p.Period, p.Timeout
	if period == 0 {
		period = 200 * time.Millisecond
	}
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	pollNodes(ctx, p.URLs, period, func(id int, base string) { p.round(ctx, id, base, timeout) })
}

// round lists every page of node id's elections and records each
// election's two answers (or the round's error, for every election).
func (p *ListPoller) round(ctx context.Context, id int, base string, timeout time.Duration) {
	sent := time.Now()
	seen := map[string]body{}
	after, errText := "", ""
	for {
		page, err := p.page(ctx, base, after, timeout)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			errText = err.Error()
			break
		}
		for _, e := range page.Elections {
			seen[e.Election] = e.Leader
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	recv := time.Now()
	for name, rec := range p.Recs {
		leader := Obs{Node: id, Kind: Leader, Sent: sent, Recv: recv, Err: errText}
		self := Obs{Node: id, Kind: Self, Sent: sent, Recv: recv, Err: errText}
		if errText == "" {
			v := seen[name] // absent: no leader known, 503 from both paths
			v.State = stateName(v.State)
			leader.Code, leader.ID, leader.Term, leader.Self, leader.State = http.StatusServiceUnavailable, v.ID, v.Term, v.Self, v.State
			if v.ID != 0 {
				leader.Code = http.StatusOK
			}
			self.Code, self.Term, self.Self, self.State = http.StatusServiceUnavailable, v.Term, v.Self, v.State
			if v.Self {
				self.Code = http.StatusOK
			}
		}
		rec.Add(leader)
		rec.Add(self)
	}
}

func (p *ListPoller) page(ctx context.Context, base, after string, timeout time.Duration) (listPage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := url.Values{"limit": {"1000"}, "prefix": {p.Prefix}}
	if after != "" {
		q.Set("after", after)
	}
	var page listPage
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/elections?"+q.Encode(), nil)
	if err != nil {
		return page, err
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return page, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return page, err
	}
	if resp.StatusCode != http.StatusOK {
		return page, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return page, fmt.Errorf("status %d, bad JSON: %v", resp.StatusCode, err)
	}
	return page, nil
}

// stateName returns the node state s (node.StateLeader, ...) as a shared
// string: a round decodes a thousand copies of a handful of names, and the
// recorders keep them.
func stateName(s string) string {
	for _, name := range []string{"leader", "follower", "no_leader", "electing"} {
		if s == name {
			return name
		}
	}
	return s
}
