package lftest

import (
	"google.golang.org/grpc"

	"github.com/electord/electord/transport/lf"
	"github.com/electord/electord/transport/lf/engine"
)

// VariantKinds are the lf pool with one setting changed, for measuring
// that setting: LockOSThread, BlockingWait, FIFO promotion, 16 events per
// wait.
var VariantKinds = []string{"lf-locked", "lf-blocking", "lf-fifo", "lf-batch16"}

func init() {
	lfKind := func(tune func(*lf.Config)) func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
		return func(register func(grpc.ServiceRegistrar), opts Options) (Server, error) {
			reg := engine.NewRegistry()
			register(reg)
			cfg := lf.Config{Workers: opts.Workers, Limits: opts.limits()}
			if tune != nil {
				tune(&cfg)
			}
			s, err := lf.New(reg, cfg)
			if err != nil {
				return nil, err
			}
			return s, nil
		}
	}
	engineKinds[KindLF] = lfKind(nil)
	engineKinds["lf-locked"] = lfKind(func(c *lf.Config) { c.LockOSThread = true })
	engineKinds["lf-blocking"] = lfKind(func(c *lf.Config) { c.BlockingWait = true })
	engineKinds["lf-fifo"] = lfKind(func(c *lf.Config) { c.Order = lf.FIFO })
	engineKinds["lf-batch16"] = lfKind(func(c *lf.Config) { c.EventsPerWait = 16 })
}
