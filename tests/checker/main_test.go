// The command as the Rust side runs it: a file in, a report and an exit code out.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCommand runs the command with args and returns its exit code and output.
func runCommand(args ...string) (code int, stdout, stderr string) {
	var out, errs strings.Builder
	code = run(args, &out, &errs)
	return code, out.String(), errs.String()
}

func TestAGoodHistoryExitsZero(t *testing.T) {
	h := history(
		op(1, opPut, "k", 0, 10).val("a"),
		op(2, opGetConsistent, "k", 20, 30).reads("a"),
		op(3, opGet, "k", 40, 50).reads("a"),
		op(4, opAdd, "svc", 0, 10).addr("x"),
		op(5, opList, "svc", 20, 30).lists("x"),
	)
	h.Ops[1].Face = "grpc"
	code, out, errs := runCommand(writeHistory(t, encode(t, h)))
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"history: seed 1, lag 1000 ms, 5 ops; no faults",
		"config: 3 ops on 1 key (http 2, grpc 1): put ok 1; get_consistent ok 1; get ok 1",
		"instances: 2 ops on 1 key (http 2, grpc 0): add ok 1; list ok 1",
		"linearizable: yes (4 ops on 2 keys;",
		"bounded staleness of plain gets (lag 1000 ms): yes (1 reads; 0 served",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestAViolationExitsOneAndWritesTheVisualization(t *testing.T) {
	h := history(
		op(1, opPut, "app/db.url", 0, 10).val("a"),
		op(2, opPut, "app/db.url", 20, 30).val("b"),
		op(3, opGetConsistent, "app/db.url", 40, 50).reads("a"),
		op(4, opAdd, "svc", 0, 10).addr("x"),
		op(5, opList, "svc", 20, 30).lists("x"),
	)
	h.Faults = []Fault{{Node: 2, Kind: "pause", FromUs: 15_000, ToUs: 35_000}}
	dir := filepath.Join(t.TempDir(), "viz")
	code, out, errs := runCommand("--html", dir, "--timeout", "10s", writeHistory(t, encode(t, h)))
	if code != exitViolation {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitViolation, out, errs)
	}
	path := filepath.Join(dir, "config-app_db.url.html")
	if !strings.Contains(out, "visualization: "+path) {
		t.Errorf("output does not name %s:\n%s", path, out)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The page embeds the operations as the model describes them, and the fault.
	for _, want := range []string{"<html", `get_consistent → ok \"a\"`, "node 2", "pause"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("%s lacks %q", path, want)
		}
	}
	// Only the key that fails gets a page.
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in %s, want 1", len(entries), dir)
	}
}

func TestMalformedInputExitsTwoNamingTheField(t *testing.T) {
	// A valid op, to be spoiled one field at a time.
	const good = `{"id": 7, "client": 1, "node": 1, "face": "http", "kind": "config", "key": "k",
		"op": "cas", "value": "v-1-7", "expect": "v-1-4", "call_us": 10, "return_us": 20,
		"status": "ok", "error": ""}`
	wrap := func(op string) string {
		return `{"seed": 1, "lag_ms": 1000, "faults": [], "ops": [` + op + `]}`
	}
	spoil := func(old, new string) string {
		if !strings.Contains(good, old) {
			panic("no " + old + " in the op")
		}
		return wrap(strings.Replace(good, old, new, 1))
	}
	cases := []struct {
		name, file, want string
	}{
		{"empty", "", "empty"},
		{"not JSON", `{"seed": 1,,}`, "line 1, column 12"},
		{"trailing data", wrap(good) + " {}", "trailing data"},
		{"seed missing", `{"lag_ms": 1000, "ops": []}`, `"seed" is missing`},
		{"lag missing", `{"seed": 1, "ops": []}`, `"lag_ms" is missing`},
		{"ops missing", `{"seed": 1, "lag_ms": 1000}`, `"ops" is missing`},
		{"unknown field", spoil(`"error": ""`, `"eror": ""`), `unknown field "eror"`},
		{"wrong type", spoil(`"call_us": 10`, `"call_us": "10"`), `"ops.call_us" at line 2`},
		{"expect missing", spoil(`"expect": "v-1-4",`, ``), `ops[0] (id 7): "expect" is missing`},
		{"value missing", spoil(`"value": "v-1-7",`, ``), `"value" is missing`},
		{"id missing", spoil(`"id": 7,`, ``), `ops[0]: "id" is missing`},
		{"node zero", spoil(`"node": 1`, `"node": 0`), `"node" is 0`},
		{"bad face", spoil(`"http"`, `"ftp"`), `"face" is "ftp"`},
		{"bad kind", spoil(`"config"`, `"configs"`), `"kind" is "configs"`},
		{"bad op", spoil(`"cas"`, `"add"`), `"op" is "add"`},
		{"bad status", spoil(`"status": "ok"`, `"status": "timeout"`), `"status" is "timeout"`},
		{"return before call", spoil(`"return_us": 20`, `"return_us": 5`), `"return_us" 5 is before "call_us" 10`},
		{"read result missing", wrap(`{"id": 1, "client": 1, "node": 1, "face": "grpc", "kind": "config", "key": "k",
			"op": "get", "call_us": 1, "return_us": 2, "status": "ok"}`), `"found" is missing`},
		{"read value missing", wrap(`{"id": 1, "client": 1, "node": 1, "face": "grpc", "kind": "config", "key": "k",
			"op": "get_consistent", "call_us": 1, "return_us": 2, "status": "ok", "found": true}`), `"read" is missing`},
		{"list result missing", wrap(`{"id": 1, "client": 1, "node": 1, "face": "grpc", "kind": "instances",
			"key": "s", "op": "list", "call_us": 1, "return_us": 2, "status": "ok"}`), `"addrs" is missing`},
		{"duplicate id", wrap(good + "," + strings.Replace(good, "v-1-7", "v-1-8", 1)), `"id" 7 is also the id of ops[0]`},
		{"duplicate value", wrap(good + "," + strings.Replace(good, `"id": 7`, `"id": 8`, 1)), `"value" "v-1-7" was also written by id 7`},
		{"fault node missing", `{"seed": 1, "lag_ms": 1, "ops": [], "faults": [{"kind": "pause", "from_us": 1, "to_us": 2}]}`,
			`faults[0]: "node" is missing`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCommand(writeHistory(t, []byte(c.file)))
			if code != exitBadInput {
				t.Fatalf("exit %d, want %d\n%s%s", code, exitBadInput, out, errs)
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("stderr lacks %q: %s", c.want, errs)
			}
		})
	}
}

func TestBadUsageExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"a.json", "b.json"},
		{"--timeout", "soon", "a.json"},
		{filepath.Join(t.TempDir(), "missing.json")},
	} {
		if code, _, _ := runCommand(args...); code != exitBadInput {
			t.Errorf("%q: exit %d, want %d", args, code, exitBadInput)
		}
	}
}
