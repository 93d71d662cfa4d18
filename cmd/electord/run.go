package main

import (
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/electord/electord/config"
	"github.com/electord/electord/daemon"
	"github.com/electord/electord/internal/binpages"
)

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "electord",
		Short: "Run one electord node",
		Long: `electord runs one node of a leader election cluster. Configuration comes from
flags, ELECTORD_* environment variables (ELECTORD_HEARTBEAT_INTERVAL=...) and a
YAML file (--config), in that order of precedence.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags())
			if err != nil {
				return configError{err}
			}
			if err := cfg.Validate(); err != nil {
				return configError{err}
			}
			log := newLogger(cfg.LogLevel, cfg.LogFormat)
			setMaxProcs(cfg.MaxProcs, log)
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
			exit := make(chan struct{}, 1)
			// Leader-only routing in Kubernetes (k8s.go), when configured:
			// its settings and client before any port is bound.
			k8s, err := prepareK8s(cfg)
			if err != nil {
				return err
			}
			d, err := daemon.Start(cfg, daemon.Options{Logger: log, Exit: func() { exit <- struct{}{} }, Collectors: k8s.collectors()})
			if err != nil {
				return err
			}
			stopK8s, err := k8s.start(d, log)
			if err != nil {
				d.Stop()
				return err
			}
			defer stopK8s()
			// Start-up is over: the binary's pages that only it used
			// (package inits, config, clients' set-up) leave the resident
			// set; what the node keeps running maps its pages again.
			if s, err := binpages.Release(); err != nil {
				log.Warn("could not release the binary's start-up pages; RSS stays higher", "err", err)
			} else {
				log.Debug("released the binary's start-up pages", "mappings", s.Mappings, "bytes", s.Bytes)
			}
			select {
			case s := <-sigs:
				log.Info("stopping", "signal", s.String())
			case <-exit:
				log.Info("stopping: electctl kill --exit")
			case <-d.Done():
			}
			// A leader hands over before it leaves (bounded by two
			// heartbeat timeouts); a second signal ends the process at once.
			go func() {
				s := <-sigs
				log.Warn("second signal: exiting without a clean stop", "signal", s.String())
				os.Exit(1)
			}()
			return d.Stop()
		},
	}
	config.Register(cmd.Flags())
	return cmd
}

// setMaxProcs applies the max-procs key (0: leave Go's default), unless
// the GOMAXPROCS environment variable is set: an operator who sets the
// runtime's own variable means it. Set before the daemon starts, so the lf
// pool (peer-workers 0) is sized by it.
func setMaxProcs(n int, log *slog.Logger) {
	if env := os.Getenv("GOMAXPROCS"); env != "" {
		log.Debug("max-procs: GOMAXPROCS is set in the environment and wins", "GOMAXPROCS", env, "max-procs", n)
		return
	}
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
}

func newLogger(level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
