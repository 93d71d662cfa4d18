package membership

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultKeyPoll is how often the gossip key file is checked for a change.
const DefaultKeyPoll = 5 * time.Second

// ReadKeyFile reads a gossip key file: one key a line, base64 of 16, 24 or
// 32 bytes (AES-128, -192, -256); blank lines and lines starting with '#'
// are skipped. The first key is the primary one, which encrypts what this
// node sends; every key listed decrypts what it receives.
//
// Rotating a key without downtime takes three edits of every node's file,
// each rolled out to all nodes before the next: (1) install: append the new
// key; (2) use: move it first; (3) remove: delete the old one.
func ReadKeyFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip-key-file: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("gossip-key-file %s, line %d: not base64: %v", path, i+1, err)
		}
		if err := memberlist.ValidateKey(k); err != nil {
			return nil, fmt.Errorf("gossip-key-file %s, line %d: %d bytes: want 16, 24 or 32", path, i+1, len(k))
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip-key-file %s: no key (one base64 key a line; generate one with electord certs gossip-key)", path)
	}
	return keys, nil
}

// watchKeys re-reads the key file when it changes and installs its keys:
// new ones are added, the first is made primary, missing ones are removed.
func (m *Membership) watchKeys(ring *memberlist.Keyring, every time.Duration) {
	stamp := fileStamp(m.cfg.KeyFile)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stopRetry:
			return
		case <-t.C:
		}
		now := fileStamp(m.cfg.KeyFile)
		if now == stamp {
			continue
		}
		stamp = now
		keys, err := ReadKeyFile(m.cfg.KeyFile)
		if err != nil {
			m.log.Error("gossip keys: keeping the previous keys", "err", err)
			continue
		}
		if err := installKeys(ring, keys); err != nil {
			m.log.Error("gossip keys: keeping the previous keys", "err", err)
			continue
		}
		m.log.Info("gossip keys reloaded", "keys", len(keys), "file", m.cfg.KeyFile)
	}
}

func installKeys(ring *memberlist.Keyring, keys [][]byte) error {
	for _, k := range keys {
		if err := ring.AddKey(k); err != nil {
			return err
		}
	}
	if err := ring.UseKey(keys[0]); err != nil {
		return err
	}
	for _, old := range ring.GetKeys() {
		if !containsKey(keys, old) {
			if err := ring.RemoveKey(old); err != nil {
				return err
			}
		}
	}
	return nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%d/%d", fi.ModTime().UnixNano(), fi.Size())
}
