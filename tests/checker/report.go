// What the checker prints: a summary of the history, each check's verdict, and
// for a violation the operations that show it as a table.

package main

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anishathalye/porcupine"
)

// writeSummary prints the run's parameters and, per kind, how many operations of
// each op ended with each status.
func writeSummary(w io.Writer, h *History) {
	faults := "no faults"
	if len(h.Faults) > 0 {
		var each []string
		for _, f := range h.Faults {
			each = append(each, fmt.Sprintf("node %d %s %s–%s ms", f.Node, f.Kind, ms(f.FromUs), ms(f.ToUs)))
		}
		faults = "faults: " + strings.Join(each, ", ")
	}
	fmt.Fprintf(w, "history: seed %d, lag %d ms, %d ops; %s\n", h.Seed, h.LagMs, len(h.Ops), faults)

	for _, kind := range []string{kindConfig, kindInstances} {
		counts := make(map[string]map[Status]int)
		keys := make(map[string]bool)
		faces := make(map[string]int)
		n := 0
		for _, op := range h.Ops {
			if op.Kind != kind {
				continue
			}
			if counts[op.Op] == nil {
				counts[op.Op] = make(map[Status]int)
			}
			counts[op.Op][op.Status]++
			keys[op.Key] = true
			faces[op.Face]++
			n++
		}
		if n == 0 {
			fmt.Fprintf(w, "%s: no ops\n", kind)
			continue
		}
		var parts []string
		for _, name := range opsOf[kind] {
			if counts[name] == nil {
				continue
			}
			part := name
			for _, s := range statuses {
				if c := counts[name][s]; c > 0 {
					part += fmt.Sprintf(" %s %d", s, c)
				}
			}
			parts = append(parts, part)
		}
		fmt.Fprintf(w, "%s: %d ops on %s (http %d, grpc %d): %s\n",
			kind, n, count(len(keys), "key"), faces["http"], faces["grpc"], strings.Join(parts, "; "))
	}
}

// reportLinearizability prints porcupine's verdicts and, for each object that
// fails, its operations and (with htmlDir) the path of its visualization. It
// tells whether every object passed.
func reportLinearizability(w io.Writer, checks []*linCheck, faults []Fault, htmlDir string, timeout time.Duration) bool {
	var failed []*linCheck
	ops, unobserved := 0, 0
	var slowest time.Duration
	for _, c := range checks {
		ops += len(c.ops)
		unobserved += c.unobserved
		slowest = max(slowest, c.elapsed)
		if c.result != porcupine.Ok {
			failed = append(failed, c)
		}
	}
	if unobserved > 0 {
		fmt.Fprintf(w, "left out: %d unknown instance writes that nothing observed (as if they never happened, which no verdict can tell apart)\n", unobserved)
	}
	if len(failed) == 0 {
		fmt.Fprintf(w, "linearizable: yes (%d ops on %s; the slowest key took %s)\n",
			ops, count(len(checks), "key"), slowest.Round(time.Millisecond))
		return true
	}
	fmt.Fprintf(w, "linearizable: NO (%d of %d keys fail)\n", len(failed), len(checks))
	names := make(map[string]bool) // visualization files written, to keep names apart
	for _, c := range failed {
		fmt.Fprintln(w)
		switch {
		case c.skipped:
			fmt.Fprintf(w, "%s was not checked: the %s allowed for the whole check (--timeout) ran out first; an unchecked history does not pass\n",
				c.object, timeout)
			continue
		case c.result == porcupine.Unknown:
			fmt.Fprintf(w, "%s: porcupine found no answer in %s (--timeout) for its %d ops; a history too hard to check does not pass\n",
				c.object, c.elapsed.Round(time.Millisecond), len(c.ops))
		default:
			prefix, at := c.stuck()
			fmt.Fprintf(w, "%s is not linearizable (%d ops): the longest linearizable prefix porcupine found has %d ops",
				c.object, len(c.ops), prefix)
			if at != nil {
				fmt.Fprintf(w, ", and id %d (marked >>) cannot follow it", at.ID)
			}
			fmt.Fprintln(w)
			rows := make([]row, len(c.ops))
			for i, op := range c.ops {
				rows[i] = row{op: op}
				if op == at {
					rows[i].mark = ">>"
				}
			}
			writeTable(w, rows)
		}
		if htmlDir == "" {
			continue
		}
		name := visualizationName(c.object)
		for i := 2; names[name]; i++ {
			name = strings.TrimSuffix(visualizationName(c.object), ".html") + fmt.Sprintf("-%d.html", i)
		}
		names[name] = true
		path := filepath.Join(htmlDir, name)
		if err := c.visualize(path, faults); err != nil {
			fmt.Fprintf(w, "visualization: not written: %v\n", err)
		} else {
			fmt.Fprintf(w, "visualization: %s\n", path)
		}
	}
	return false
}

// reportStaleness prints the staleness verdict and each violation with the
// writes that show it. It tells whether every read passed.
func reportStaleness(w io.Writer, s staleness, lagMs int64) bool {
	head := fmt.Sprintf("bounded staleness of plain gets (lag %d ms):", lagMs)
	if len(s.violations) == 0 {
		fmt.Fprintf(w, "%s yes (%d reads; %d served by a node inside a fault window, exempt from the lag)\n",
			head, s.reads, s.exempt)
		return true
	}
	fmt.Fprintf(w, "%s NO (%d of %d reads)\n", head, len(s.violations), s.reads)
	for _, v := range s.violations {
		fmt.Fprintf(w, "\n%s: get id %d %s\n", object{v.read.Kind, v.read.Key}, v.read.ID, v.reason)
		rows := []row{{mark: "read", op: v.read}}
		if v.wrote != nil {
			mark := "wrote it"
			if v.wrote.Op == opDelete {
				mark = "deleted"
			}
			rows = append(rows, row{mark: mark, op: v.wrote})
		}
		if v.overwrite != nil {
			rows = append(rows, row{mark: "then", op: v.overwrite})
		}
		writeTable(w, rows)
	}
	return false
}

// row is one line of an operation table; mark says why it is there.
type row struct {
	mark string
	op   *Op
}

// writeTable prints operations sorted by call time. A return time followed by
// '?' is when the client gave up on an unknown outcome.
func writeTable(w io.Writer, rows []row) {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.op.CallUs, b.op.CallUs) })
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "\tid\tclient\tnode\tface\top\targs\tresult\tcall ms\treturn ms\terror")
	for _, r := range rows {
		op := r.op
		ret := ms(op.ReturnUs)
		if op.Status == StatusUnknown {
			ret += "?"
		}
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.mark, op.ID, op.Client, op.Node, op.Face, op.Op, describeArgs(op), describeResult(op),
			ms(op.CallUs), ret, clip(op.Error, 60))
	}
	t.Flush()
}

// describeArgs is what an operation was asked to do, beyond its op and key.
func describeArgs(op *Op) string {
	switch op.Op {
	case opPut:
		return fmt.Sprintf("%q", op.Value)
	case opCas:
		return fmt.Sprintf("%q if %q", op.Value, op.Expect)
	case opAdd, opRemove:
		return op.Addr
	}
	return ""
}

// describeResult is an operation's outcome and, for an answered read, what it read.
func describeResult(op *Op) string {
	if op.Status != StatusOK {
		return string(op.Status)
	}
	switch op.Op {
	case opGet, opGetConsistent:
		if !op.Found {
			return "ok absent"
		}
		return fmt.Sprintf("ok %q", op.Read)
	case opList:
		return "ok {" + strings.Join(op.Addrs, ", ") + "}"
	}
	return "ok"
}

// ms renders microseconds as milliseconds with three decimals.
func ms(us int64) string {
	return fmt.Sprintf("%.3f", float64(us)/1000)
}

// count is n and the noun, in the plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
