package config

import (
	"strings"
	"testing"
	"time"
)

// Each spread-* key out of its range is refused, naming the key.
func TestValidateSpread(t *testing.T) {
	for _, tc := range []struct {
		key string
		set func(*Config)
	}{
		{"spread-imbalance", func(c *Config) { c.SpreadImbalance = 0 }},
		{"spread-imbalance", func(c *Config) { c.SpreadImbalance = 1.5 }},
		{"spread-rebalance-interval", func(c *Config) { c.SpreadRebalanceInterval = time.Millisecond }},
		{"spread-rebalance-batch", func(c *Config) { c.SpreadRebalanceBatch = 0 }},
		{"spread-rebalance-batch", func(c *Config) { c.SpreadRebalanceBatch = 65 }},
	} {
		c := Default()
		var errs []string
		tc.set(&c)
		c.validateSpread(func(key, format string, a ...any) { errs = append(errs, key) })
		if len(errs) != 1 || errs[0] != tc.key {
			t.Errorf("%s out of range: errors for %v", tc.key, errs)
		}
	}
	var errs []string
	Default().validateSpread(func(key, format string, a ...any) { errs = append(errs, key) })
	if len(errs) != 0 {
		t.Errorf("the defaults: errors for %v", strings.Join(errs, ", "))
	}
}
