// The bounded-staleness check of plain config gets: a plain read may lag the
// latest acknowledged write by up to the history's lag, but never returns a value
// that was not written, or not yet, and never one replaced longer ago than that.

package main

import (
	"cmp"
	"math"
	"slices"
)

// staleRead is a plain get the staleness rules refuse, with the writes that show it.
type staleRead struct {
	read   *Op
	reason string
	// wrote is the write of the value read, or the delete the read's absence
	// could have come from, if there is one.
	wrote *Op
	// overwrite is the acknowledged write that had replaced it more than the lag
	// before the read began, if that is the reason.
	overwrite *Op
}

// staleness is the outcome of the staleness check.
type staleness struct {
	reads      int // plain gets that were answered
	exempt     int // of those, reads served by a node inside one of its fault windows
	violations []staleRead
}

// checkStaleness applies the rules to every answered plain get, key by key.
func checkStaleness(h *History) staleness {
	lag := h.LagMs * 1000
	writerOf := make(map[string]*Op) // value -> the put or cas that wrote it
	writesOn := make(map[string][]*Op)
	var reads []*Op
	for _, op := range h.Ops {
		if op.Kind != kindConfig {
			continue
		}
		switch op.Op {
		case opPut, opCas:
			writerOf[op.Value] = op
			writesOn[op.Key] = append(writesOn[op.Key], op)
		case opDelete:
			writesOn[op.Key] = append(writesOn[op.Key], op)
		case opGet:
			if op.Status == StatusOK {
				reads = append(reads, op)
			}
		}
	}
	slices.SortStableFunc(reads, func(a, b *Op) int { return cmp.Compare(a.CallUs, b.CallUs) })

	var s staleness
	for _, read := range reads {
		s.reads++
		exempt := h.inFault(read, lag)
		if exempt {
			s.exempt++
		}
		var v *staleRead
		if read.Found {
			v = checkValueRead(read, writerOf[read.Read], writesOn[read.Key], lag, exempt)
		} else if !exempt {
			v = checkAbsentRead(read, writesOn[read.Key], lag)
		}
		if v != nil {
			s.violations = append(s.violations, *v)
		}
	}
	return s
}

// checkValueRead checks a read that returned a value, written by w (nil if no
// operation wrote it).
func checkValueRead(read, w *Op, writes []*Op, lag int64, exempt bool) *staleRead {
	switch {
	case w == nil:
		return &staleRead{read: read, reason: "returned a value no operation wrote"}
	case w.Key != read.Key:
		return &staleRead{read: read, wrote: w, reason: "returned a value written to another key"}
	case w.didNotHappen():
		return &staleRead{read: read, wrote: w, reason: "returned a value whose only write definitely failed"}
	case w.CallUs >= read.ReturnUs:
		return &staleRead{read: read, wrote: w,
			reason: "returned a value from the future: its write began after the read returned"}
	case exempt:
		return nil
	}
	// Anything that changed the value after w returned, and returned itself
	// more than the lag before the read began, should have reached the reader.
	if w2 := earliestReturn(writes, func(w2 *Op) bool {
		return w2 != w && w2.Status == StatusOK && w2.CallUs > returnOrNever(w) && w2.ReturnUs < read.CallUs-lag
	}); w2 != nil {
		return &staleRead{read: read, wrote: w, overwrite: w2,
			reason: "returned a value overwritten more than the lag before the read began"}
	}
	return nil
}

// checkAbsentRead checks a read that found nothing. The absence needs a source
// — the initial state, or a delete that had begun by the time the read returned —
// that no acknowledged put or cas replaced more than the lag before the read
// began. An acknowledged delete keeps the item absent, so it replaces nothing.
func checkAbsentRead(read *Op, writes []*Op, lag int64) *staleRead {
	replacedAfter := func(since int64) *Op {
		return earliestReturn(writes, func(w2 *Op) bool {
			return w2.Op != opDelete && w2.Status == StatusOK && w2.CallUs > since && w2.ReturnUs < read.CallUs-lag
		})
	}
	// The initial state: any acknowledged write replaced it.
	overwrite := replacedAfter(math.MinInt64)
	if overwrite == nil {
		return nil
	}
	var latest *Op // the delete that came closest, to show when none will do
	for _, d := range writes {
		if d.Op != opDelete || d.didNotHappen() || d.CallUs >= read.ReturnUs {
			continue
		}
		w2 := replacedAfter(returnOrNever(d))
		if w2 == nil {
			return nil
		}
		if latest == nil || d.CallUs > latest.CallUs {
			latest, overwrite = d, w2
		}
	}
	reason := "found nothing, though a value was written more than the lag before the read began"
	if latest != nil {
		reason = "found nothing, though every delete it could reflect was overwritten " +
			"more than the lag before the read began"
	}
	return &staleRead{read: read, wrote: latest, overwrite: overwrite, reason: reason}
}

// earliestReturn is the write matching keep that returned first, or nil.
func earliestReturn(writes []*Op, keep func(*Op) bool) *Op {
	var first *Op
	for _, w := range writes {
		if keep(w) && (first == nil || w.ReturnUs < first.ReturnUs) {
			first = w
		}
	}
	return first
}

// inFault tells whether the node that served read was inside one of its fault
// windows at any time from the lag before the read began to its return: a paused
// or cut-off node may serve what it held when the fault began.
func (h *History) inFault(read *Op, lag int64) bool {
	for _, f := range h.Faults {
		if f.Node == read.Node && f.FromUs <= read.ReturnUs && f.ToUs >= read.CallUs-lag {
			return true
		}
	}
	return false
}
