// A small language for writing histories in tests, and their encoding in the
// file format, so that tests can go through the command as the Rust side does.

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// op starts an operation with times in milliseconds, acknowledged, sent by
// client id to node 1 over HTTP. The kind follows from the op.
func op(id int64, name, key string, callMs, returnMs int64) *Op {
	kind := kindConfig
	switch name {
	case opAdd, opRemove, opList:
		kind = kindInstances
	}
	return &Op{
		ID: id, Client: int(id), Node: 1, Face: "http",
		Kind: kind, Key: key, Op: name,
		CallUs: callMs * 1000, ReturnUs: returnMs * 1000,
		Status: StatusOK,
	}
}

func (o *Op) val(v string) *Op          { o.Value = v; return o }
func (o *Op) cas(expect, v string) *Op  { o.Expect, o.Value = expect, v; return o }
func (o *Op) addr(a string) *Op         { o.Addr = a; return o }
func (o *Op) on(node int) *Op           { o.Node = node; return o }
func (o *Op) ended(s Status) *Op        { o.Status = s; return o }
func (o *Op) reads(v string) *Op        { o.Found, o.Read = true, v; return o }
func (o *Op) absent() *Op               { o.Found, o.Read = false, ""; return o }
func (o *Op) lists(addrs ...string) *Op { o.Addrs = addrs; return o }

// history is a history with a lag of one second and no faults.
func history(ops ...*Op) *History {
	return &History{Seed: 1, LagMs: 1000, Ops: ops}
}

// encode writes h in the file format, as the Rust side does.
func encode(t *testing.T, h *History) []byte {
	t.Helper()
	faults := []map[string]any{}
	for _, f := range h.Faults {
		faults = append(faults, map[string]any{"node": f.Node, "kind": f.Kind, "from_us": f.FromUs, "to_us": f.ToUs})
	}
	ops := []map[string]any{}
	for _, o := range h.Ops {
		m := map[string]any{
			"id": o.ID, "client": o.Client, "node": o.Node, "face": o.Face,
			"kind": o.Kind, "key": o.Key, "op": o.Op,
			"call_us": o.CallUs, "return_us": o.ReturnUs,
			"status": o.Status, "error": o.Error,
		}
		switch o.Op {
		case opPut:
			m["value"] = o.Value
		case opCas:
			m["value"], m["expect"] = o.Value, o.Expect
		case opAdd, opRemove:
			m["addr"] = o.Addr
		case opGet, opGetConsistent:
			m["found"] = o.Found
			if o.Found {
				m["read"] = o.Read
			}
		case opList:
			addrs := o.Addrs
			if addrs == nil {
				addrs = []string{}
			}
			m["addrs"] = addrs
		}
		ops = append(ops, m)
	}
	data, err := json.MarshalIndent(map[string]any{
		"seed": h.Seed, "lag_ms": h.LagMs, "faults": faults, "ops": ops,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeHistory saves data as a history file in a test's temporary directory.
func writeHistory(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
