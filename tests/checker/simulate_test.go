// A guard against false alarms: histories generated from a sequential simulation
// of correct registers and sets, with each operation's interval drawn around its
// linearization point, must pass both checks; one corrupted read must not.

package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// simulation runs random operations one after another against correct objects
// and records them as concurrent clients would have seen them.
type simulation struct {
	rng *rand.Rand
	h   *History
	// now is the linearization point of the next operation, in microseconds.
	now int64
	// registers and sets are the objects' current states.
	registers map[string]register
	sets      map[string]addrSet
	// changes are each register's states over time, for plain gets that read
	// the state of some moment within the lag.
	changes map[string][]change
	values  []string // every value written, for cas expectations
}

type change struct {
	at    int64
	state register
}

const (
	simStep   = 1_000  // µs between linearization points
	simSpread = 15_000 // µs an interval may reach on either side of its point
)

func simulate(seed uint64, n int) *History {
	s := &simulation{
		rng:       rand.New(rand.NewPCG(seed, 0)),
		h:         &History{Seed: int64(seed), LagMs: 1000},
		registers: make(map[string]register),
		sets:      make(map[string]addrSet),
		changes:   make(map[string][]change),
	}
	for i := range n {
		s.now += simStep
		id := int64(i + 1)
		if s.rng.IntN(5) < 3 {
			s.configOp(id, fmt.Sprintf("c%d", s.rng.IntN(3)))
		} else {
			s.instancesOp(id, fmt.Sprintf("s%d", s.rng.IntN(2)))
		}
	}
	return s.h
}

// record adds an operation linearized at s.now, with an interval around it.
func (s *simulation) record(id int64, kind, key, name string) *Op {
	call := max(0, s.now-1-s.rng.Int64N(simSpread))
	op := &Op{
		ID: id, Client: s.rng.IntN(8), Node: 1 + s.rng.IntN(3), Face: []string{"http", "grpc"}[s.rng.IntN(2)],
		Kind: kind, Key: key, Op: name,
		CallUs: call, ReturnUs: s.now + 1 + s.rng.Int64N(simSpread),
		Status: StatusOK,
	}
	s.h.Ops = append(s.h.Ops, op)
	return op
}

// outcome decides how a write ends: mostly acknowledged, sometimes unknown
// (half of those took effect), rarely refused. It tells whether to apply it.
func (s *simulation) outcome(op *Op) bool {
	switch r := s.rng.IntN(100); {
	case r < 4:
		op.Status, op.Error = StatusUnknown, "timeout"
		return s.rng.IntN(2) == 0
	case r < 6 && op.Op != opCas:
		op.Status, op.Error = StatusFail, "refused"
		return false
	}
	return true
}

func (s *simulation) configOp(id int64, key string) {
	state := s.registers[key]
	set := func(next register) {
		s.registers[key] = next
		s.changes[key] = append(s.changes[key], change{s.now, next})
	}
	switch r := s.rng.IntN(100); {
	case r < 25:
		op := s.record(id, kindConfig, key, opPut)
		op.Value = fmt.Sprintf("v-%d", id)
		s.values = append(s.values, op.Value)
		if s.outcome(op) {
			set(register{present: true, value: op.Value})
		}
	case r < 45:
		op := s.record(id, kindConfig, key, opCas)
		op.Value = fmt.Sprintf("v-%d", id)
		// Mostly the current value, so that most cas succeed.
		op.Expect = state.value
		if !state.present || s.rng.IntN(3) == 0 {
			op.Expect = "never"
			if len(s.values) > 0 {
				op.Expect = s.values[s.rng.IntN(len(s.values))]
			}
		}
		s.values = append(s.values, op.Value)
		holds := state.present && state.value == op.Expect
		if s.outcome(op) && holds {
			set(register{present: true, value: op.Value})
		} else if op.Status == StatusOK && !holds {
			op.Status = StatusFail
		}
	case r < 55:
		op := s.record(id, kindConfig, key, opDelete)
		if s.outcome(op) {
			set(register{})
		}
	case r < 80:
		op := s.record(id, kindConfig, key, opGetConsistent)
		op.Found, op.Read = state.present, state.value
	default:
		op := s.record(id, kindConfig, key, opGet)
		// A replica serves the state of some moment from the lag before the
		// call to the return.
		from := max(0, op.CallUs-s.h.LagMs*1000)
		moment := from + s.rng.Int64N(min(op.ReturnUs, s.now)-from+1)
		seen := register{}
		for _, c := range s.changes[key] {
			if c.at <= moment {
				seen = c.state
			}
		}
		op.Found, op.Read = seen.present, seen.value
	}
}

func (s *simulation) instancesOp(id int64, key string) {
	addr := fmt.Sprintf("127.0.0.%d:8848", 1+s.rng.IntN(4))
	switch r := s.rng.IntN(100); {
	case r < 35:
		op := s.record(id, kindInstances, key, opAdd)
		op.Addr = addr
		if s.outcome(op) {
			_, next := stepSet(s.sets[key], op)
			s.sets[key] = next
		}
	case r < 60:
		op := s.record(id, kindInstances, key, opRemove)
		op.Addr = addr
		if s.outcome(op) {
			_, next := stepSet(s.sets[key], op)
			s.sets[key] = next
		}
	default:
		op := s.record(id, kindInstances, key, opList)
		op.Addrs = slices.Clone(s.sets[key])
	}
}

func TestSimulatedCorrectHistoriesPass(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			h := roundTrip(t, simulate(seed, 3000))
			start := time.Now()
			var out strings.Builder
			if !check(h, &out, "", time.Minute) {
				t.Fatalf("a correct history failed:\n%s", &out)
			}
			for line := range strings.Lines(out.String()) {
				if strings.HasPrefix(line, "linearizable:") {
					t.Logf("%d ops, checked in %s; %s",
						len(h.Ops), time.Since(start).Round(time.Millisecond), strings.TrimSpace(line))
				}
			}
		})
	}
}

// spoil makes one answered read of op return a value from the future: the value of
// a put on its key that was called after the read returned. It returns the read.
func spoil(t *testing.T, h *History, op string) *Op {
	t.Helper()
	for _, r := range h.Ops {
		if r.Op != op || r.Status != StatusOK {
			continue
		}
		for _, w := range h.Ops {
			if w.Op == opPut && w.Key == r.Key && w.Status == StatusOK && w.CallUs > r.ReturnUs {
				r.Found, r.Read = true, w.Value
				return r
			}
		}
	}
	t.Fatalf("no %s to spoil", op)
	return nil
}

func TestASimulatedHistoryWithOneBadReadFails(t *testing.T) {
	h := simulate(7, 3000)
	consistent := spoil(t, h, opGetConsistent)
	plain := spoil(t, h, opGet)
	h = roundTrip(t, h)
	if reportLinearizability(io.Discard, checkLinearizability(h, time.Minute), nil, "", time.Minute) {
		t.Errorf("a consistent read of a value from the future (id %d) passed", consistent.ID)
	}
	s := checkStaleness(h)
	if len(s.violations) != 1 || s.violations[0].read.ID != plain.ID {
		t.Errorf("a plain read of a value from the future (id %d) gave %+v", plain.ID, s.violations)
	}
}
