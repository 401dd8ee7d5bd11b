// The linearizability check: the history split by object (kind and key), each
// part given to porcupine on its own, and the visualization of a part that fails.

package main

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// object names one partition: a config item or a service.
type object struct {
	kind string
	key  string
}

func (o object) String() string { return fmt.Sprintf("%s %q", o.kind, o.key) }

// linCheck is porcupine's verdict on one object.
type linCheck struct {
	object object
	// ops is what porcupine was given; porcupine's operation ids index it.
	ops     []*Op
	model   porcupine.Model
	result  porcupine.CheckResult
	info    porcupine.LinearizationInfo
	elapsed time.Duration
	// skipped: the time allowed for the whole check was spent before this
	// object's turn came, so porcupine never looked at it.
	skipped bool
	// unobserved counts the unknown writes left out because nothing observed them
	// ([dropUnobserved]).
	unobserved int
}

// checkedByPorcupine tells whether an operation takes part in the linearizability
// check. Plain gets are checked for staleness instead. A failed or refused write
// did not happen, but a failed cas observed that the item did not hold its
// expected value. A read that was not answered observed nothing.
func checkedByPorcupine(op *Op) bool {
	switch {
	case op.Op == opGet:
		return false
	case op.Status == StatusRefused:
		return false
	case op.Op == opCas:
		return true
	case op.isWrite():
		return op.Status != StatusFail
	default:
		return op.Status == StatusOK
	}
}

// partition groups the operations porcupine checks by object, objects sorted by
// kind then key, each object's operations by call time.
func partition(h *History) []*linCheck {
	byObject := make(map[object][]*Op)
	for _, op := range h.Ops {
		if checkedByPorcupine(op) {
			o := object{op.Kind, op.Key}
			byObject[o] = append(byObject[o], op)
		}
	}
	checks := make([]*linCheck, 0, len(byObject))
	for o, ops := range byObject {
		slices.SortStableFunc(ops, func(a, b *Op) int { return cmp.Compare(a.CallUs, b.CallUs) })
		model := configModel()
		unobserved := 0
		if o.kind == kindInstances {
			model = instancesModel()
			ops, unobserved = dropUnobserved(ops)
		}
		checks = append(checks, &linCheck{object: o, ops: ops, model: model, unobserved: unobserved})
	}
	slices.SortFunc(checks, func(a, b *linCheck) int {
		return cmp.Or(cmp.Compare(a.object.kind, b.object.kind), cmp.Compare(a.object.key, b.object.key))
	})
	return checks
}

// checkLinearizability runs porcupine on every object, as many at once as there
// are cores. timeout bounds the whole check (0: no bound); an object whose turn
// comes after it passed is reported as skipped, never as passing.
func checkLinearizability(h *History, timeout time.Duration) []*linCheck {
	checks := partition(h)
	never := h.end()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			var left time.Duration // 0 is no limit to porcupine
			if !deadline.IsZero() {
				if left = time.Until(deadline); left <= 0 {
					c.result, c.skipped = porcupine.Unknown, true
					return
				}
			}
			start := time.Now()
			c.result, c.info = porcupine.CheckOperationsVerbose(c.model, c.operations(never), left)
			c.elapsed = time.Since(start)
		})
	}
	wg.Wait()
	return checks
}

// end is a time after every event of the history: the return time of operations
// whose outcome is unknown. Past every call and return, it orders exactly as
// infinity would (the operation may be linearized anywhere after its call, or at
// the end, where nothing observes it), and keeps the visualization's times readable.
func (h *History) end() int64 {
	var last int64
	for _, op := range h.Ops {
		last = max(last, op.ReturnUs)
	}
	for _, f := range h.Faults {
		last = max(last, f.ToUs)
	}
	return last + 1
}

// returnOrNever is when an operation is known to have finished: never, for an
// unknown outcome.
func returnOrNever(op *Op) int64 {
	if op.Status == StatusUnknown {
		return math.MaxInt64
	}
	return op.ReturnUs
}

// settledBy maps each unknown write that later operations show took effect to the
// earliest return of such an operation, for an object's operations (sorted by
// call). Whatever it maps took effect before then.
//
// Config: a value is written once, so a get_consistent that read it, or a cas that
// succeeded expecting it, shows its put or cas took effect. Instances: an address is
// added once and removed at most once (the workload's rule), so a list that holds it
// shows its add took effect, and a list that began after the add was known to have
// taken effect and does not hold it shows its remove did.
func settledBy(ops []*Op) map[*Op]int64 {
	settled := make(map[*Op]int64)
	note := func(op *Op, at int64) {
		if old, ok := settled[op]; (!ok || at < old) && at > op.CallUs {
			settled[op] = at
		}
	}
	if len(ops) > 0 && ops[0].Kind == kindInstances {
		// Only addresses added once and removed at most once: a list that holds an
		// address reused by several adds does not say which of them took effect.
		adds := make(map[string]int)
		removes := make(map[string]int)
		for _, op := range ops {
			switch op.Op {
			case opAdd:
				adds[op.Addr]++
			case opRemove:
				removes[op.Addr]++
			}
		}
		added := make(map[string]*Op)
		removed := make(map[string]*Op)
		for _, op := range ops {
			if adds[op.Addr] > 1 || removes[op.Addr] > 1 {
				continue
			}
			switch op.Op {
			case opAdd:
				added[op.Addr] = op
			case opRemove:
				removed[op.Addr] = op
			}
		}
		// When each add is known to have taken effect: its return, or the first list
		// that held its address.
		in := make(map[string]int64)
		for addr, add := range added {
			if add.Status == StatusOK {
				in[addr] = add.ReturnUs
			}
		}
		for _, op := range ops {
			if op.Op != opList || op.Status != StatusOK {
				continue
			}
			for _, addr := range op.Addrs {
				if add, ok := added[addr]; ok && add.Status == StatusUnknown {
					note(add, op.ReturnUs)
					if at, ok := in[addr]; !ok || op.ReturnUs < at {
						in[addr] = op.ReturnUs
					}
				}
			}
		}
		for _, op := range ops {
			if op.Op != opList || op.Status != StatusOK {
				continue
			}
			holds := make(map[string]bool, len(op.Addrs))
			for _, addr := range op.Addrs {
				holds[addr] = true
			}
			for addr, remove := range removed {
				if at, ok := in[addr]; ok && remove.Status == StatusUnknown && !holds[addr] && op.CallUs > at {
					note(remove, op.ReturnUs)
				}
			}
		}
		return settled
	}
	// The config writes of each value.
	wrote := make(map[string]*Op)
	for _, op := range ops {
		if op.Op == opPut || op.Op == opCas {
			wrote[op.Value] = op
		}
	}
	for _, op := range ops {
		if op.Status != StatusOK {
			continue
		}
		var value string
		switch {
		case op.Op == opGetConsistent && op.Found:
			value = op.Read
		case op.Op == opCas:
			value = op.Expect
		default:
			continue
		}
		if w, ok := wrote[value]; ok && w.Status == StatusUnknown {
			note(w, op.ReturnUs)
		}
	}
	return settled
}

// dropUnobserved leaves out of a service's operations (sorted by call) the unknown
// adds and removes that no list settled ([settledBy]), and says how many went.
//
// Each address is added once and removed at most once, so such a write changed
// nothing anyone saw: an add whose address no list ever held, a remove after which
// every list that could tell still held the address. A linearization of the history
// without it is one with it placed at the end (where an unknown write may always go),
// and the other way round, so leaving it out changes no verdict — and each write of
// unknown outcome left open to the end multiplies porcupine's search: a 600 s campaign
// with a dozen per service did not finish in a minute. (Config writes are kept: a
// compare-and-set that failed may have observed a value nothing read.)
func dropUnobserved(ops []*Op) ([]*Op, int) {
	settled := settledBy(ops)
	writes := make(map[[2]string]int) // (op, address) -> how many
	for _, op := range ops {
		if op.isWrite() {
			writes[[2]string{op.Op, op.Addr}]++
		}
	}
	once := func(addr string) bool {
		return writes[[2]string{opAdd, addr}] <= 1 && writes[[2]string{opRemove, addr}] <= 1
	}
	kept := ops[:0:0]
	for _, op := range ops {
		// An address added or removed more than once breaks the rule: its writes stay.
		if op.Status == StatusUnknown && op.isWrite() && once(op.Addr) {
			if _, ok := settled[op]; !ok {
				continue
			}
		}
		kept = append(kept, op)
	}
	return kept, len(ops) - len(kept)
}

// operations converts the object's operations for porcupine; never is the return
// time of unknown outcomes. An unknown write that later operations show took
// effect ([settledBy]) is given the return of the first of them, which every
// linearization of the history respects already, and which keeps it from staying
// open to the end — each open operation multiplies porcupine's search.
func (c *linCheck) operations(never int64) []porcupine.Operation {
	lanes := visualizationLanes(c.ops)
	settled := settledBy(c.ops)
	ops := make([]porcupine.Operation, len(c.ops))
	for i, op := range c.ops {
		ret := op.ReturnUs
		if op.Status == StatusUnknown {
			ret = never
			if at, ok := settled[op]; ok {
				ret = at
			}
		}
		ops[i] = porcupine.Operation{
			ClientId: lanes[i],
			Input:    op,
			Call:     op.CallUs,
			Output:   op,
			Return:   ret,
			Metadata: op,
		}
	}
	return ops
}

// visualizationLanes gives each operation its row in the visualization: one row
// per client, in client order, and a row of its own for each unknown outcome,
// which stays open to the end and would cover its client's later operations.
func visualizationLanes(ops []*Op) []int {
	var clients []int
	for _, op := range ops {
		if op.Status != StatusUnknown {
			clients = append(clients, op.Client)
		}
	}
	slices.Sort(clients)
	clients = slices.Compact(clients)
	lanes := make([]int, len(ops))
	extra := len(clients)
	for i, op := range ops {
		if op.Status == StatusUnknown {
			lanes[i] = extra
			extra++
			continue
		}
		lanes[i], _ = slices.BinarySearch(clients, op.Client)
	}
	return lanes
}

// stuck tells where porcupine's search ended: the length of the longest
// linearizable prefix it found, and the operation that could not follow it (of
// those outside the prefix, the one that returned first; an unknown outcome can
// always be placed, so it is never the one).
func (c *linCheck) stuck() (prefix int, at *Op) {
	var longest []int
	for _, partials := range c.info.PartialLinearizations() {
		for _, p := range partials {
			if len(p) > len(longest) {
				longest = p
			}
		}
	}
	placed := make([]bool, len(c.ops))
	for _, id := range longest {
		placed[id] = true
	}
	for i, op := range c.ops {
		if placed[i] || op.Status == StatusUnknown {
			continue
		}
		if at == nil || op.ReturnUs < at.ReturnUs {
			at = op
		}
	}
	return len(longest), at
}

// visualize writes porcupine's visualization of the object to path, with the
// history's faults as annotations on rows of their own.
func (c *linCheck) visualize(path string, faults []Fault) error {
	info := c.info
	var notes []porcupine.Annotation
	for _, f := range faults {
		notes = append(notes, porcupine.Annotation{
			Tag:             fmt.Sprintf("node %d", f.Node),
			Start:           f.FromUs,
			End:             f.ToUs,
			Description:     f.Kind,
			Details:         fmt.Sprintf("node %d %s from %s to %s ms", f.Node, f.Kind, ms(f.FromUs), ms(f.ToUs)),
			BackgroundColor: "#fde2e2",
		})
	}
	info.AddAnnotations(notes)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(c.model, info, path)
}

// visualizationName is the file name of an object's visualization: the kind and
// the key, with anything a file name should not hold replaced by '_'.
func visualizationName(o object) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, o.key)
	return o.kind + "-" + safe + ".html"
}
