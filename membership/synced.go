package membership

import "time"

// Synced follows every Join of what RetryJoin's first attempt learnt.
// memberlist reports the state a join brings as it merges it, in the
// joining goroutine (NotifyJoin), and Join waits for every seed's attempt,
// so each member without proofs is queued before synced runs. With proofs
// (Config.Prove) a member's Join comes when its proof ends, on a proof
// goroutine: Synced is owed until no proof is pending, or syncedWaitMax
// has passed (a claimant that never answers must not hold it for good;
// its Join, if it proves itself, comes later like any other).

// syncedWaitMax bounds how long Synced waits for proofs: one proof's
// timeout.
const syncedWaitMax = proofTimeout

// synced reports Synced now, or once the proofs pending now have ended.
func (m *Membership) synced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncOwed = true
	if m.syncIfProvenLocked() {
		return
	}
	time.AfterFunc(syncedWaitMax, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.syncOwed {
			m.syncOwed = false
			m.q.push(Event{Type: Synced})
		}
	})
}

// syncIfProvenLocked reports Synced if it is owed and no proof is pending,
// and says whether it is no longer owed. m.mu is held.
func (m *Membership) syncIfProvenLocked() bool {
	if !m.syncOwed {
		return true
	}
	for _, mb := range m.members {
		if mb.valid && mb.proof == proofPending {
			return false
		}
	}
	m.syncOwed = false
	m.q.push(Event{Type: Synced})
	return true
}
