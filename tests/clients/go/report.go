package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

var out sync.Mutex

// step prints one JSON line: {"step": name, "ok": true, ...fields}.
func step(name string, fields map[string]any) {
	line := map[string]any{"step": name, "ok": true}
	for k, v := range fields {
		line[k] = v
	}
	emit(line)
}

func emit(line map[string]any) {
	b, err := json.Marshal(line)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"step":"report","ok":false,"reason":%q}`, err.Error()))
	}
	out.Lock()
	defer out.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

// fail reports a failed step and ends the run with status 1.
func fail(name string, format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	emit(map[string]any{"step": name, "ok": false, "reason": reason})
	out.Lock()
	fmt.Fprintf(os.Stderr, "FAIL %s: %s\n", name, reason)
	os.Exit(1)
}

// check fails the step when err is not nil.
func check(name string, err error) {
	if err != nil {
		fail(name, "%v", err)
	}
}

// watchdog ends the run with status 3 after d, whatever it is doing.
func watchdog(d time.Duration) {
	go func() {
		time.Sleep(d)
		out.Lock()
		fmt.Fprintf(os.Stderr, "FAIL watchdog: the run took longer than %s\n", d)
		os.Exit(3)
	}()
}

// waitFor polls cond every 50 ms until it answers "" (met) or d passes; it answers the
// last reason when the time is up.
func waitFor(d time.Duration, cond func() string) (time.Duration, string) {
	start := time.Now()
	for {
		reason := cond()
		if reason == "" {
			return time.Since(start), ""
		}
		if time.Since(start) > d {
			return time.Since(start), reason
		}
		time.Sleep(50 * time.Millisecond)
	}
}
