//go:build linux

package lf

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/electord/electord/internal/rawsys"
	"github.com/electord/electord/transport/lf/engine"
)

func (s *Server) acceptAll(l *handle) {
	pause := false
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
		}
		if pause {
			// Out of descriptors: the pending connection keeps the
			// listener readable, so re-arming now would spin the poller.
			// Keep holding it for a back-off, as net/http's Serve does.
			s.acceptDelay = min(max(2*s.acceptDelay, 5*time.Millisecond), time.Second)
			time.AfterFunc(s.acceptDelay, func() { s.settleListener(l) })
			return
		}
		s.settleListener(l)
	}()
	for !s.stopping.Load() {
		nfd, sa, err := s.probe.accept4(l.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch err {
		case nil:
		case unix.EINTR, unix.ECONNABORTED:
			continue
		case unix.EAGAIN:
			return
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			s.connErrs.Add(1)
			s.acceptPauses.Add(1)
			pause = true
			return
		default:
			s.connErrs.Add(1)
			return
		}
		s.acceptDelay = 0
		s.accepts.Add(1)
		if s.openConns.Load() >= int64(s.cfg.MaxConns) {
			s.refusedConns.Add(1)
			unix.Close(nfd)
			continue
		}
		s.newConn(nfd, sa)
	}
}

func (s *Server) newConn(fd int, sa unix.Sockaddr) {
	switch sa.(type) {
	case *unix.SockaddrInet4, *unix.SockaddrInet6:
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	c := &handle{fd: fd, gen: s.nextGen(), kind: kindConn}
	c.since = s.clock()
	first := s.cfg.HandshakeTimeout
	if s.cfg.IdleTimeout > 0 {
		first = min(first, s.cfg.IdleTimeout)
	}
	s.schedule(c.since + int64(first))
	c.state.Store(stHeld)
	s.probe.acquired(c)
	s.handlesMu.Lock()
	s.handles[fd] = c
	s.handlesMu.Unlock()
	s.openConns.Add(1)
	if s.cfg.TLS != nil {
		s.startTLS(c, rawsys.Addr(sa))
		return
	}
	s.runConn(c, func() bool {
		c.sess = engine.NewSession(s.reg, s.cfg.Limits, rawsys.Addr(sa))
		return s.flush(c) != nil
	})
}

// settleListener re-arms the listener, or closes it once stopping.
func (s *Server) settleListener(l *handle) {
	for {
		if s.stopping.Load() {
			s.closeListener(l)
			return
		}
		s.disown(l)
		if s.stopping.Load() {
			// A sweep may have missed it while we held it.
			if s.acquire(l) {
				continue
			}
			return
		}
		s.arm(l)
		return
	}
}

func (s *Server) closeListener(l *handle) {
	s.handlesMu.Lock()
	if s.handles[l.fd] == l {
		delete(s.handles, l.fd)
	}
	s.handlesMu.Unlock()
	s.probe.released(l)
	s.closeFD(l)
	s.listenerClosed.Store(true)
	s.maybeFinish()
}
