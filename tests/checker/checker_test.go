// Small synthetic histories that show each check both failing and passing.

package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// roundTrip passes h through the file format, so that every test also reads
// what it checks the way the command does.
func roundTrip(t *testing.T, h *History) *History {
	t.Helper()
	decoded, err := decodeHistory(encode(t, h))
	if err != nil {
		t.Fatalf("the test's own history does not decode: %v", err)
	}
	return decoded
}

func TestLinearizability(t *testing.T) {
	cases := []struct {
		name string
		ops  []*Op
		ok   bool
	}{
		{"a linearizable mixed history passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			// A cas and a read that overlap it: the read may come first.
			op(2, opCas, "k", 20, 40).cas("a", "b"),
			op(3, opGetConsistent, "k", 25, 35).reads("a"),
			op(4, opGetConsistent, "k", 50, 60).reads("b"),
			op(5, opCas, "k", 70, 80).cas("a", "c").ended(StatusFail),
			op(6, opDelete, "k", 90, 100),
			op(7, opGetConsistent, "k", 110, 120).absent(),
			op(8, opDelete, "k", 130, 140), // deleting an absent item succeeds
			op(9, opCas, "k", 150, 160).cas("b", "d").ended(StatusFail),
			op(10, opAdd, "svc", 0, 10).addr("127.0.0.1:80"),
			op(11, opAdd, "svc", 5, 15).addr("127.0.0.2:80"),
			op(12, opList, "svc", 20, 30).lists("127.0.0.2:80", "127.0.0.1:80"),
			op(13, opRemove, "svc", 40, 50).addr("127.0.0.1:80"),
			op(14, opList, "svc", 45, 55).lists("127.0.0.1:80", "127.0.0.2:80"),
			op(15, opList, "svc", 60, 70).lists("127.0.0.2:80"),
			// Failed operations did not happen; unanswered reads observed nothing.
			op(16, opAdd, "svc", 80, 90).addr("127.0.0.3:80").ended(StatusFail),
			op(17, opList, "svc", 100, 110).ended(StatusUnknown),
			op(18, opList, "svc", 120, 130).lists("127.0.0.2:80"),
		}, true},
		{"a consistent get returning an overwritten value fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 20, 30).val("b"),
			op(3, opGetConsistent, "k", 40, 50).reads("a"),
		}, false},
		{"two cas with the same expect both ok fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 20, 30).cas("a", "b"),
			op(3, opCas, "k", 25, 35).cas("a", "c"),
		}, false},
		{"an acknowledged delete followed by a get still seeing the item fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 20, 30),
			op(3, opGetConsistent, "k", 40, 50).reads("a"),
		}, false},
		{"an acknowledged remove followed by a list still seeing the item fails", []*Op{
			op(1, opAdd, "svc", 0, 10).addr("x"),
			op(2, opRemove, "svc", 20, 30).addr("x"),
			op(3, opList, "svc", 40, 50).lists("x"),
		}, false},
		{"a get overlapping the delete may still see the item", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 20, 30),
			op(3, opGetConsistent, "k", 25, 50).reads("a"),
		}, true},
		{"an unknown put that was seen passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 20, 30).val("b").ended(StatusUnknown),
			op(3, opGetConsistent, "k", 500, 510).reads("b"),
		}, true},
		{"an unknown put that was never seen passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 20, 30).val("b").ended(StatusUnknown),
			op(3, opGetConsistent, "k", 500, 510).reads("a"),
		}, true},
		{"an unknown put seen late, long after its client gave up, passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 20, 30).val("b").ended(StatusUnknown),
			op(3, opGetConsistent, "k", 500, 510).reads("a"),
			op(4, opGetConsistent, "k", 900, 910).reads("b"),
		}, true},
		{"an unknown put seen and then unseen fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 20, 30).val("b").ended(StatusUnknown),
			op(3, opGetConsistent, "k", 500, 510).reads("b"),
			op(4, opGetConsistent, "k", 900, 910).reads("a"),
		}, false},
		{"an unknown cas that was seen passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 20, 30).cas("a", "b").ended(StatusUnknown),
			op(3, opGetConsistent, "k", 500, 510).reads("b"),
		}, true},
		{"an unknown cas whose compare could not hold cannot be seen", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 20, 30).cas("z", "b").ended(StatusUnknown),
			op(3, opGetConsistent, "k", 500, 510).reads("b"),
		}, false},
		{"unknown delete and add, seen and not seen, pass", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 20, 30).ended(StatusUnknown),
			op(3, opGetConsistent, "k", 40, 50).reads("a"),
			op(4, opGetConsistent, "k", 60, 70).absent(),
			op(5, opAdd, "svc", 0, 10).addr("x").ended(StatusUnknown),
			op(6, opList, "svc", 20, 30).lists(),
			op(7, opList, "svc", 40, 50).lists("x"),
		}, true},
		{"a put that definitely failed cannot be seen", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 20, 30).val("b").ended(StatusFail),
			op(3, opGetConsistent, "k", 40, 50).reads("b"),
		}, false},
		{"a cas fail the model cannot explain fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 20, 30).cas("a", "b").ended(StatusFail),
		}, false},
		{"a cas fail explained by a concurrent put passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 15, 40).val("c"),
			op(3, opCas, "k", 20, 30).cas("a", "b").ended(StatusFail),
		}, true},
		{"a cas fail explained by an unknown put passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 12, 14).val("c").ended(StatusUnknown),
			op(3, opCas, "k", 20, 30).cas("a", "b").ended(StatusFail),
		}, true},
		{"an instance list missing an acknowledged add fails", []*Op{
			op(1, opAdd, "svc", 0, 10).addr("x"),
			op(2, opAdd, "svc", 0, 10).addr("y"),
			op(3, opList, "svc", 20, 30).lists("y"),
		}, false},
		{"a list overlapping an add may miss it", []*Op{
			op(1, opAdd, "svc", 0, 10).addr("x"),
			op(2, opAdd, "svc", 15, 40).addr("y"),
			op(3, opList, "svc", 20, 30).lists("x"),
		}, true},
		{"an empty value, which no write has, fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opGetConsistent, "k", 20, 30).reads(""),
		}, false},
		{"keys are independent registers", []*Op{
			op(1, opPut, "k1", 0, 10).val("a"),
			op(2, opPut, "k2", 20, 30).val("b"),
			op(3, opGetConsistent, "k1", 40, 50).reads("a"),
			op(4, opGetConsistent, "k2", 40, 50).reads("b"),
		}, true},
		{"a refused cas compared nothing: it may expect what the item holds", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 20, 30).cas("a", "b").ended(StatusRefused),
			op(3, opGetConsistent, "k", 40, 50).reads("a"),
		}, true},
		{"a failed cas that expected what the item held fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 20, 30).cas("a", "b").ended(StatusFail),
			op(3, opGetConsistent, "k", 40, 50).reads("a"),
		}, false},
		{"a refused put that is read after all fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a").ended(StatusRefused),
			op(2, opGetConsistent, "k", 20, 30).reads("a"),
		}, false},
		{"an unknown put settled by a later read must precede it", []*Op{
			// Settled by op 3's return (40), the put cannot slip after op 4's read
			// of the older value.
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 5, 6).val("b").ended(StatusUnknown),
			op(3, opGetConsistent, "k", 30, 40).reads("b"),
			op(4, opGetConsistent, "k", 50, 60).reads("a"),
		}, false},
		{"an unknown add settled by a list, then removed unknown and gone from a later list", []*Op{
			op(1, opAdd, "svc", 0, 10).addr("x").ended(StatusUnknown),
			op(2, opList, "svc", 20, 30).lists("x"),
			op(3, opRemove, "svc", 40, 45).addr("x").ended(StatusUnknown),
			op(4, opList, "svc", 50, 60).lists(),
			op(5, opList, "svc", 70, 80).lists(),
		}, true},
		{"an address added again keeps its unknown writes, which a list may need", []*Op{
			op(1, opAdd, "svc", 0, 10).addr("x"),
			op(2, opRemove, "svc", 20, 30).addr("x"),
			op(3, opAdd, "svc", 40, 45).addr("x").ended(StatusUnknown),
			op(4, opList, "svc", 50, 60).lists("x"),
		}, true},
		{"unknown writes nothing observed are left out, and a lost remove still shows", []*Op{
			op(1, opAdd, "svc", 0, 5).addr("never-seen").ended(StatusUnknown),
			op(2, opAdd, "svc", 0, 10).addr("x"),
			op(3, opRemove, "svc", 20, 25).addr("x").ended(StatusUnknown),
			op(4, opList, "svc", 30, 40).lists("x"),
			op(5, opRemove, "svc", 50, 60).addr("y"),
			op(6, opAdd, "svc", 45, 48).addr("y"),
			op(7, opList, "svc", 70, 80).lists("x", "y"),
		}, false},
		{"an unknown remove settled by a list cannot be undone by a later one", []*Op{
			op(1, opAdd, "svc", 0, 10).addr("x"),
			op(2, opRemove, "svc", 20, 25).addr("x").ended(StatusUnknown),
			op(3, opList, "svc", 30, 40).lists(),
			op(4, opList, "svc", 50, 60).lists("x"),
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := roundTrip(t, history(c.ops...))
			checks := checkLinearizability(h, 10*time.Second)
			var out strings.Builder
			ok := reportLinearizability(&out, checks, nil, "", 10*time.Second)
			if ok != c.ok {
				t.Errorf("linearizable = %v, want %v; report:\n%s", ok, c.ok, &out)
			}
			// Plain gets are not involved, so staleness has nothing to say.
			if s := checkStaleness(h); len(s.violations) > 0 {
				t.Errorf("unexpected staleness violations: %+v", s.violations)
			}
		})
	}
}

func TestUnknownInstanceWritesNothingObservedAreLeftOut(t *testing.T) {
	h := roundTrip(t, history(
		op(1, opAdd, "svc", 0, 5).addr("never-seen").ended(StatusUnknown),
		op(2, opAdd, "svc", 0, 10).addr("x"),
		op(3, opRemove, "svc", 20, 25).addr("x").ended(StatusUnknown),
		op(4, opList, "svc", 30, 40).lists("x"),
		op(5, opAdd, "svc", 50, 55).addr("z").ended(StatusUnknown),
		op(6, opList, "svc", 60, 70).lists("x", "z"),
	))
	checks := checkLinearizability(h, 10*time.Second)
	if len(checks) != 1 || checks[0].result != porcupine.Ok {
		t.Fatalf("want one linearizable service, got %+v", checks)
	}
	// The add of an address no list held and the remove every later list contradicts
	// go; the add a list saw stays.
	if got := checks[0].unobserved; got != 2 {
		t.Errorf("left out %d unknown writes, want 2", got)
	}
	if len(checks[0].ops) != 4 {
		t.Errorf("porcupine got %d ops, want 4", len(checks[0].ops))
	}
}

func TestAViolationNamesTheOperationThatCannotBePlaced(t *testing.T) {
	h := roundTrip(t, history(
		op(1, opPut, "k", 0, 10).val("a"),
		op(2, opPut, "k", 20, 30).val("b"),
		op(3, opGetConsistent, "k", 40, 50).reads("a"),
		op(4, opGetConsistent, "k", 60, 70).reads("b"),
	))
	var out strings.Builder
	if reportLinearizability(&out, checkLinearizability(h, 10*time.Second), nil, "", 10*time.Second) {
		t.Fatal("passed")
	}
	report := out.String()
	for _, want := range []string{
		`config "k" is not linearizable (4 ops)`,
		"id 3 (marked >>) cannot follow it",
		">>  3   3       1     http  get_consistent",
		`ok "a"`, "40.000", "50.000",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestAHistoryTooHardToCheckInTimeFails(t *testing.T) {
	h := roundTrip(t, history(
		op(1, opPut, "k", 0, 10).val("a"),
		op(2, opGetConsistent, "k", 20, 30).reads("a"),
	))
	// A deadline that has passed before porcupine starts: the key is never
	// checked, and that must not read as a pass.
	checks := checkLinearizability(h, time.Nanosecond)
	var out strings.Builder
	if reportLinearizability(&out, checks, nil, "", time.Nanosecond) {
		t.Fatalf("an unchecked history passed:\n%s", &out)
	}
	if !strings.Contains(out.String(), "does not pass") {
		t.Errorf("the report does not say why:\n%s", &out)
	}
	// porcupine's own timeout is reported as a failure too.
	c := &linCheck{object: object{kindConfig, "k"}, result: porcupine.Unknown, elapsed: time.Second}
	out.Reset()
	if reportLinearizability(&out, []*linCheck{c}, nil, "", time.Second) {
		t.Fatalf("a timed-out check passed:\n%s", &out)
	}
	if !strings.Contains(out.String(), "porcupine found no answer") {
		t.Errorf("the report does not say porcupine timed out:\n%s", &out)
	}
}

func TestStaleness(t *testing.T) {
	// put a at 0-10 ms, overwritten by put b at 100-110 ms; the lag is 1 s.
	overwritten := func(read *Op) []*Op {
		return []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opPut, "k", 100, 110).val("b"),
			read,
		}
	}
	pause := []Fault{{Node: 3, Kind: "pause", FromUs: 4_000_000, ToUs: 6_000_000}}
	cases := []struct {
		name   string
		ops    []*Op
		faults []Fault
		ok     bool
	}{
		{"a value overwritten 5 s before, with a lag of 1 s, fails",
			overwritten(op(3, opGet, "k", 5110, 5120).on(3).reads("a")), nil, false},
		{"a value overwritten within the lag passes",
			overwritten(op(3, opGet, "k", 1050, 1060).on(3).reads("a")), nil, true},
		{"the latest value passes",
			overwritten(op(3, opGet, "k", 5110, 5120).on(3).reads("b")), nil, true},
		{"a stale read from a node inside its fault window passes",
			overwritten(op(3, opGet, "k", 5110, 5120).on(3).reads("a")), pause, true},
		{"a fault window that ended more than the lag before the read exempts nothing",
			overwritten(op(3, opGet, "k", 7110, 7120).on(3).reads("a")), pause, false},
		{"another node's fault window exempts nothing",
			overwritten(op(3, opGet, "k", 5110, 5120).on(2).reads("a")), pause, false},
		{"a value from the future fails", []*Op{
			op(1, opGet, "k", 50, 60).reads("a"),
			op(2, opPut, "k", 100, 110).val("a"),
		}, nil, false},
		{"a value from the future fails inside a fault window too", []*Op{
			op(1, opGet, "k", 4050, 4060).on(3).reads("a"),
			op(2, opPut, "k", 4100, 4110).val("a"),
		}, pause, false},
		{"a value written concurrently with the read passes", []*Op{
			op(1, opGet, "k", 50, 60).reads("a"),
			op(2, opPut, "k", 40, 110).val("a"),
		}, nil, true},
		{"a value nobody wrote fails", []*Op{
			op(1, opGet, "k", 50, 60).reads("zzz"),
		}, nil, false},
		{"an empty value, which no write has, fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opGet, "k", 50, 60).reads(""),
		}, nil, false},
		{"a value written to another key fails", []*Op{
			op(1, opPut, "other", 0, 10).val("a"),
			op(2, opGet, "k", 50, 60).reads("a"),
		}, nil, false},
		{"a value whose only write definitely failed fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a").ended(StatusFail),
			op(2, opGet, "k", 50, 60).reads("a"),
		}, nil, false},
		{"a value of an unknown write read long after passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a").ended(StatusUnknown),
			op(2, opPut, "k", 100, 110).val("b"),
			op(3, opGet, "k", 9000, 9010).reads("a"),
		}, nil, true},
		{"a value deleted more than the lag before fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 100, 110),
			op(3, opGet, "k", 5110, 5120).reads("a"),
		}, nil, false},
		{"a value replaced by a cas more than the lag before fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 100, 110).cas("a", "b"),
			op(3, opGet, "k", 5110, 5120).reads("a"),
		}, nil, false},
		{"a failed cas replaces nothing", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opCas, "k", 100, 110).cas("z", "b").ended(StatusFail),
			op(3, opGet, "k", 5110, 5120).reads("a"),
		}, nil, true},
		{"absent before any write passes", []*Op{
			op(1, opGet, "k", 0, 5).absent(),
			op(2, opPut, "k", 100, 110).val("a"),
		}, nil, true},
		{"absent within the lag of the first write passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opGet, "k", 500, 510).absent(),
		}, nil, true},
		{"absent long after the first write fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opGet, "k", 5000, 5010).absent(),
		}, nil, false},
		{"absent after a delete within the lag passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 1000, 1010),
			op(3, opGet, "k", 1500, 1510).absent(),
		}, nil, true},
		{"absent long after a delete passes while nothing was written since", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 1000, 1010),
			op(3, opDelete, "k", 2000, 2010),
			op(4, opGet, "k", 9000, 9010).absent(),
		}, nil, true},
		{"absent after a delete overwritten more than the lag before fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 100, 110),
			op(3, opPut, "k", 200, 210).val("b"),
			op(4, opGet, "k", 5000, 5010).absent(),
		}, nil, false},
		{"absent after an unknown delete passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 100, 110).ended(StatusUnknown),
			op(3, opGet, "k", 5000, 5010).absent(),
		}, nil, true},
		{"absent after a failed delete fails", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opDelete, "k", 100, 110).ended(StatusFail),
			op(3, opGet, "k", 5000, 5010).absent(),
		}, nil, false},
		{"absent inside a fault window passes", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opGet, "k", 5000, 5010).on(3).absent(),
		}, pause, true},
		{"unanswered gets are dropped", []*Op{
			op(1, opPut, "k", 0, 10).val("a"),
			op(2, opGet, "k", 5000, 5010).ended(StatusUnknown),
			op(3, opGet, "k", 5000, 5010).ended(StatusFail),
		}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := history(c.ops...)
			h.Faults = c.faults
			h = roundTrip(t, h)
			s := checkStaleness(h)
			var out strings.Builder
			if ok := reportStaleness(&out, s, h.LagMs); ok != c.ok {
				t.Errorf("fresh = %v, want %v; report:\n%s", ok, c.ok, &out)
			}
			// Plain gets are never given to porcupine.
			if !reportLinearizability(io.Discard, checkLinearizability(h, 10*time.Second), nil, "", 0) {
				t.Error("the writes alone are not linearizable")
			}
		})
	}
}

func TestAStaleReadIsShownWithTheWriteItReturnedAndTheOverwrite(t *testing.T) {
	h := roundTrip(t, history(
		op(1, opPut, "k", 0, 10).val("a"),
		op(2, opPut, "k", 100, 110).val("b"),
		op(3, opGet, "k", 5110, 5120).on(3).reads("a"),
	))
	var out strings.Builder
	if reportStaleness(&out, checkStaleness(h), h.LagMs) {
		t.Fatal("passed")
	}
	report := out.String()
	for _, want := range []string{
		`config "k": get id 3 returned a value overwritten more than the lag`,
		"read      3", "wrote it  1", "then      2",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
