// Command roster-goclients runs the real Go clients our users run — nacos-sdk-go v1 and v2,
// dubbo-go, go-micro, grpc-go, HashiCorp's consul/api — against roster processes that the
// black-box Rust tests start. One binary, one subcommand per scenario, so that
// scripts/test builds and links the heavy dependency graph once:
//
//	roster-goclients <scenario> [flags]
//
// Each scenario prints one JSON object per step on stdout ({"step":…,"ok":true,…}), exits 0
// only when every check passed, and otherwise prints the failing step with "ok":false and a
// "FAIL <step>: <reason>" line on stderr. Every wait is bounded and every scenario has a
// whole-run watchdog, so none can hang a test. See README.md beside this file.
package main

import (
	"fmt"
	"os"
	"sort"
)

// scenarios maps a subcommand to its entry point; each scenario's file adds itself in init.
var scenarios = map[string]func(args []string){}

func main() {
	if len(os.Args) < 2 || scenarios[os.Args[1]] == nil {
		names := make([]string, 0, len(scenarios))
		for name := range scenarios {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: roster-goclients <scenario> [flags]\nscenarios: %v\n", names)
		os.Exit(2)
	}
	scenarios[os.Args[1]](os.Args[2:])
}
