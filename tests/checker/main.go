// Command roster-checker checks a history of client operations that a roster
// black-box test recorded against a real cluster under faults: config items and
// instance sets must be linearizable (checked with porcupine, key by key), and
// plain config reads may lag by at most the history's lag.
//
//	roster-checker [--html DIR] [--timeout 60s] HISTORY.json
//
// It exits 0 when every check passes, 1 on a violation (or a history too hard to
// check in time), and 2 on bad usage or a malformed history. README.md describes
// the history format.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Exit codes.
const (
	exitOK        = 0
	exitViolation = 1
	exitBadInput  = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command, apart from the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("roster-checker", flag.ContinueOnError)
	flags.SetOutput(stderr)
	htmlDir := flags.String("html", "", "write porcupine's visualization of each key that fails to `DIR`/<kind>-<key>.html")
	timeout := flags.Duration("timeout", 60*time.Second, "time the linearizability check may take in all (0: no limit)")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: roster-checker [--html DIR] [--timeout 60s] HISTORY.json")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitBadInput
	}
	if flags.NArg() != 1 {
		flags.Usage()
		return exitBadInput
	}
	path := flags.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "roster-checker: %v\n", err)
		return exitBadInput
	}
	h, err := decodeHistory(data)
	if err != nil {
		fmt.Fprintf(stderr, "roster-checker: %s: %v\n", path, err)
		return exitBadInput
	}
	if check(h, stdout, *htmlDir, *timeout) {
		return exitOK
	}
	return exitViolation
}

// check runs both checks on h and prints their report; it tells whether both pass.
func check(h *History, w io.Writer, htmlDir string, timeout time.Duration) bool {
	writeSummary(w, h)
	// Both checks run and report, so that one violation does not hide another.
	linearizable := reportLinearizability(w, checkLinearizability(h, timeout), h.Faults, htmlDir, timeout)
	fmt.Fprintln(w)
	fresh := reportStaleness(w, checkStaleness(h), h.LagMs)
	return linearizable && fresh
}
