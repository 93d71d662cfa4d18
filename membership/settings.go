package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/memberlist"
)

// Settings are the properties of the cluster rather than of one node: every
// member must run with the same ones. A node gossips them in its
// metadata, and a node whose settings differ is not let in: gossip ignores
// its alive messages, and a join (push/pull) that would merge it fails.
type Settings struct {
	Algorithm string `json:"algorithm"`
	Quorum    int    `json:"quorum"`
	Preempt   bool   `json:"preempt"`
}

// ErrSettingsDiffer wraps every refusal for differing cluster settings.
var ErrSettingsDiffer = errors.New("cluster settings differ")

// diff names the first setting in which theirs differs from s, with both
// values, or returns "".
func (s Settings) diff(theirs Settings) string {
	switch {
	case s.Algorithm != theirs.Algorithm:
		return fmt.Sprintf("algorithm: it runs %s, this node %s", theirs.Algorithm, s.Algorithm)
	case s.Quorum != theirs.Quorum:
		return fmt.Sprintf("quorum: it runs %d, this node %d (0 = off)", theirs.Quorum, s.Quorum)
	case s.Preempt != theirs.Preempt:
		return fmt.Sprintf("preempt: it runs %v, this node %v", theirs.Preempt, s.Preempt)
	}
	return ""
}

// checkSettings returns an error wrapping ErrSettingsDiffer if n gossips
// cluster settings other than this node's. Metadata that does not decode is
// left to the callers that read it (NotifyJoin, NotifyUpdate), which report
// it; a node that gossips no settings at all differs.
func (m *Membership) checkSettings(n *memberlist.Node) error {
	w, err := m.metas.decode(n)
	if err != nil {
		return nil
	}
	if w.Settings == nil {
		return fmt.Errorf("%w: node %s at %s gossips no cluster settings (algorithm, quorum, preempt); this node runs %+v",
			ErrSettingsDiffer, n.Name, n.Address(), m.cfg.Settings)
	}
	if d := m.cfg.Settings.diff(*w.Settings); d != "" {
		return fmt.Errorf("%w: node %s at %s is refused: %s", ErrSettingsDiffer, n.Name, n.Address(), d)
	}
	return nil
}

// NotifyAlive implements memberlist.AliveDelegate: gossip about a node
// whose cluster settings differ is ignored, so it never becomes a member.
func (d delegate) NotifyAlive(n *memberlist.Node) error {
	if n.Name == d.m.name {
		return nil
	}
	err := d.m.checkSettings(n)
	if err != nil {
		d.m.refuseSettings(n.Name, err, false)
	}
	return err
}

// NotifyMerge implements memberlist.MergeDelegate: a join whose other side
// holds a node with different cluster settings fails, on both sides. A node
// that has no member yet and meets a cluster (two or more nodes) whose
// settings all differ from its own is the one misconfigured: it stands down
// (Event.Yield) instead of running alone, where it would lead a cluster of
// one beside the real one.
func (d delegate) NotifyMerge(peers []*memberlist.Node) error {
	var first error
	var name string
	differ := 0
	for _, n := range peers {
		if n.Name == d.m.name || n.State == memberlist.StateDead || n.State == memberlist.StateLeft {
			continue
		}
		if err := d.m.checkSettings(n); err != nil {
			differ++
			if first == nil {
				first, name = err, n.Name
			}
		}
	}
	if first == nil {
		return nil
	}
	d.m.refuseSettings(name, first, differ >= 2 && d.m.admittedCount() == 0)
	return first
}

// refuseSettings counts and reports a refusal for differing settings, at
// most once per node and reason every conflictRepeat (gossip repeats it).
func (m *Membership) refuseSettings(name string, err error, yield bool) {
	m.refusedSettings.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	key := "settings " + name + " " + err.Error()
	now := time.Now()
	if t, ok := m.conflicts[key]; ok && now.Sub(t) < conflictRepeat && !yield {
		return
	}
	m.conflicts[key] = now
	detail := err.Error()
	if yield {
		detail += "; this node has no member yet and the cluster it meets runs other settings: it stands down (fix its settings and restart it)"
	}
	ev := m.conflict(Meta{ID: nameID(name)}, slog.LevelError, detail)
	ev.Yield = yield
	m.q.push(ev)
}

// admittedCount is how many live members this node admitted.
func (m *Membership) admittedCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := 0
	for _, mb := range m.members {
		if mb.admitted {
			k++
		}
	}
	return k
}

// RefusedSettings counts refusals of nodes whose cluster settings differ.
func (m *Membership) RefusedSettings() uint64 { return m.refusedSettings.Load() }
