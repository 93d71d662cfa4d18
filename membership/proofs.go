package membership

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Proofs of membership. With Config.Prove (peer TLS on), a node seen
// alive in gossip is a member only once it proved its id: a mutual TLS
// handshake on the peer address it gossips must present a certificate of
// the cluster's CA for that id. Anyone with the gossip key can gossip a
// node under any id, so without the proof a party with the key and no
// certificate would count as a candidate, a ring node and towards
// bootstrap-expect. Until proven a member is pending: no Join, not listed
// by Members, no part in a term slot's settlement.
//
// What is proved is a claim: the member's gossip address, the peer address
// it gossips and the start time it reports. A changed claim (a new peer
// address, a restart at the same addresses) is proved again; a member that
// dies and comes back is a new member and is proved again. An admitted
// member whose claim changed stays a member with the metadata it proved
// (the node is not told of the new peer address) until the new claim is
// proved, then gets an Update: a forged alive message that moves a member's
// peer address (which the member refutes) changes nothing, and a failed
// proof never withdraws a member that proved itself.
//
// Proofs run on at most maxProofs goroutines, never on memberlist's or the
// node's. A failed proof is counted (RefusedClaims), reported as a Conflict
// and logged at most once per conflictRepeat per member, gossip address and
// peer address, and asked again after proofRetryMin, doubling with each
// failure in a row up to proofRetryMax: a non-member that stays in gossip
// costs a node one handshake attempt per proofRetryMax.

// proofState is where the proof of a member's current claim stands.
type proofState uint8

const (
	proofNone    proofState = iota // not asked for
	proofPending                   // queued, or a handshake is under way
	proofOK                        // it holds a certificate for its id
	proofRefused                   // it could not prove its id; asked again later
)

// claim is what a proof vouches for: a member's gossip address, the peer
// address it gossips and the start time it reports.
type claim struct {
	addr, peer string
	since      int64
}

func (mb *member) claim() claim { return claim{mb.addr, mb.meta.PeerAddr, mb.since} }

// maxProofs bounds the handshakes one node has under way: joining a
// cluster of 128 it proves 127 members, 8 at a time.
const maxProofs = 8

// proofTimeout bounds one proof.
const proofTimeout = 5 * time.Second

// proofRetryMin and proofRetryMax bound the back-off between failed proofs
// of one claim (variables for tests).
var (
	proofRetryMin = 500 * time.Millisecond
	proofRetryMax = 30 * time.Second
)

// proofJob is one queued proof.
type proofJob struct {
	name string
	cl   claim
}

// RefusedClaims counts proofs that failed: members, claims of a term slot
// and claims of this node's own id whose claimant could not prove its id
// over peer TLS.
func (m *Membership) RefusedClaims() uint64 { return m.refusedClaims.Load() }

// Unproven is how many nodes alive in gossip are not members because they
// have not proved their id (yet): pending or refused proofs.
func (m *Membership) Unproven() int {
	if m.cfg.Prove == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := 0
	for _, mb := range m.members {
		if mb.valid && !mb.admitted && mb.proof != proofOK {
			k++
		}
	}
	return k
}

// counts reports whether mb takes part in settling its term slot: without
// proofs every member with valid metadata does; with them an admitted one
// (it proved a claim) and one whose current claim is proven.
func (m *Membership) counts(mb *member) bool {
	return m.cfg.Prove == nil || mb.admitted || mb.proof == proofOK
}

// reclaimLocked notes that mb's claim changed: a claim it proved before
// (a refutation restoring its metadata) needs no new proof. m.mu is held.
func (m *Membership) reclaimLocked(mb *member) {
	if mb.proofOf == mb.claim() {
		mb.proof = proofOK
	} else {
		mb.proof, mb.failures = proofNone, 0
	}
}

// startProofLocked queues a proof of mb's current claim. m.mu is held.
func (m *Membership) startProofLocked(mb *member) {
	select {
	case <-m.stopRetry:
		return // shut down
	default:
	}
	mb.proof = proofPending
	m.proofQueue = append(m.proofQueue, proofJob{mb.name, mb.claim()})
	if m.proofWorkers < maxProofs {
		m.proofWorkers++
		go m.proveQueued()
	}
}

// proveQueued runs queued proofs until the queue is empty.
func (m *Membership) proveQueued() {
	for {
		m.mu.Lock()
		stopped := false
		select {
		case <-m.stopRetry:
			stopped = true
		default:
		}
		if stopped || len(m.proofQueue) == 0 {
			m.proofWorkers--
			if len(m.proofQueue) == 0 {
				m.proofQueue = nil // let a burst's backing array go
			}
			m.mu.Unlock()
			return
		}
		j := m.proofQueue[0]
		m.proofQueue[0] = proofJob{}
		m.proofQueue = m.proofQueue[1:]
		mb := m.members[j.name]
		due := mb != nil && mb.valid && mb.proof == proofPending && mb.claim() == j.cl
		id := nameID(j.name)
		m.mu.Unlock()
		if !due {
			m.mu.Lock()
			m.syncIfProvenLocked() // it may have been the last one pending
			m.mu.Unlock()
			continue // gone, proven meanwhile, or its claim changed (queued again)
		}
		ctx, cancel := context.WithTimeout(context.Background(), proofTimeout)
		err := m.cfg.Prove(ctx, id, j.cl.peer)
		cancel()
		m.proofDone(j.name, j.cl, err)
	}
}

// proofDone records the outcome of a proof of claim cl of member name, and
// settles its term slot again.
func (m *Membership) proofDone(name string, cl claim, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.syncIfProvenLocked() // after the Join this proof settles
	mb := m.members[name]
	if mb == nil || !mb.valid || mb.proof != proofPending || mb.claim() != cl {
		return // gone, or its claim changed (that queued another proof)
	}
	slot := slotOf(mb.meta.ID)
	if err != nil {
		mb.proof = proofRefused
		mb.failures++
		m.refusedClaims.Add(1)
		wait := min(m.proofRetryMin<<min(mb.failures-1, 16), m.proofRetryMax)
		if m.noteOnceLocked("claim " + name + " " + cl.addr + " " + cl.peer) {
			outcome := "it is not admitted as a member"
			if mb.admitted {
				outcome = "it stays a member at the peer address it proved, " + mb.shown.PeerAddr
			}
			m.q.push(m.conflict(mb.meta, slog.LevelError, fmt.Sprintf(
				"refused claim: node %d at %s claims %s but cannot prove id %d on its peer address %s: %v; %s, and is asked again in %v (reason: unproven id)",
				mb.meta.ID, cl.addr, m.claimOfLocked(mb), mb.meta.ID, cl.peer, err, outcome, wait)))
		}
		time.AfterFunc(wait, func() { m.retryProof(name, cl) })
		return
	}
	mb.proof, mb.proofOf, mb.failures = proofOK, cl, 0
	m.log.Debug("member proved its id on its peer port", "id", uint64(mb.meta.ID), "addr", cl.addr, "peer", cl.peer)
	var evs []Event
	if mb.admitted && mb.shown != mb.meta {
		mb.shown = mb.meta
		evs = append(evs, Event{Type: Update, Member: mb.meta})
	}
	m.q.push(append(evs, m.settleLocked(slot, name)...)...)
}

// claimOfLocked says what mb claims, for a refusal: a term slot another
// node holds, or membership. m.mu is held.
func (m *Membership) claimOfLocked(mb *member) string {
	slot := slotOf(mb.meta.ID)
	shared := slotOf(m.cfg.Self.ID) == slot
	for _, o := range m.members {
		shared = shared || (o != mb && o.valid && o.admitted && slotOf(o.meta.ID) == slot)
	}
	if shared {
		return "term slot " + strconv.FormatUint(slot, 10)
	}
	return "membership"
}

// retryProof asks a refused claimant again, if it is still there with the
// same claim.
func (m *Membership) retryProof(name string, cl claim) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.members[name]
	if mb == nil || !mb.valid || mb.proof != proofRefused || mb.claim() != cl {
		return
	}
	mb.proof = proofNone
	m.q.push(m.settleLocked(slotOf(mb.meta.ID), "")...)
}
