//go:build !linux

// peerbench pins threads to CPUs and reads /proc, so it runs on Linux only;
// elsewhere it says so.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "peerbench: Linux only (it pins threads with sched_setaffinity and reads CPU time from /proc)")
	os.Exit(2)
}
