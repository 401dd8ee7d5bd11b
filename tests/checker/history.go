// The history file a black-box test writes: its Go shape, and the decoding that
// refuses anything the checks could misread, naming the field at fault.

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Kinds of object a history holds; each key of each kind is checked on its own.
const (
	kindConfig    = "config"    // a register per config item, initially absent
	kindInstances = "instances" // a set of addresses per service, initially empty
)

// Operations on a config register.
const (
	opPut           = "put"
	opDelete        = "delete"
	opCas           = "cas"
	opGetConsistent = "get_consistent"
	opGet           = "get" // a plain read: checked for bounded staleness, not linearizability
)

// Operations on an instance set.
const (
	opAdd    = "add"
	opRemove = "remove"
	opList   = "list"
)

// Status is how a client saw an operation end.
type Status string

// The four outcomes a client can record.
const (
	// StatusOK: the server acknowledged the operation.
	StatusOK Status = "ok"
	// StatusFail: a definite refusal. For a cas, the compare failed; any other
	// operation did not happen.
	StatusFail Status = "fail"
	// StatusUnknown: a timeout, a 503 or a lost connection; a write may or may not
	// have taken effect, at any time after its call.
	StatusUnknown Status = "unknown"
	// StatusRefused: the server refused the operation before doing anything (not
	// ready, no leader, a bad request): it did not happen and observed nothing —
	// a refused cas compared nothing, unlike a failed one.
	StatusRefused Status = "refused"
)

// didNotHappen tells whether an operation certainly changed nothing: refused, or
// failed (a failed cas compared, but wrote nothing).
func (o *Op) didNotHappen() bool {
	return o.Status == StatusFail || o.Status == StatusRefused
}

// opsOf lists, in the order summaries show them, the operations each kind accepts.
var opsOf = map[string][]string{
	kindConfig:    {opPut, opDelete, opCas, opGetConsistent, opGet},
	kindInstances: {opAdd, opRemove, opList},
}

// statuses is the order summaries show outcomes in.
var statuses = []Status{StatusOK, StatusFail, StatusUnknown, StatusRefused}

// History is one run of clients against a cluster: what they did and the faults
// the test injected meanwhile. Times are microseconds since the run started.
type History struct {
	// Seed is the run's random seed, printed so that a failure can be replayed.
	Seed int64
	// LagMs is how far behind the latest acknowledged write a plain get may read.
	LagMs int64
	// Faults are the windows during which a node was paused, killed or cut off.
	Faults []Fault
	// Ops are the client operations, in any order.
	Ops []*Op
}

// Fault is a window during which one node was impaired.
type Fault struct {
	Node   int    // 1-based
	Kind   string // "pause", "kill", "partition", ...: shown, not interpreted
	FromUs int64
	ToUs   int64
}

// Op is one client operation as the client saw it.
type Op struct {
	ID     int64
	Client int
	Node   int    // the node the client sent it to, 1-based
	Face   string // "http" or "grpc": shown, not interpreted
	Kind   string // kindConfig or kindInstances
	Key    string // the config item or the service
	Op     string // one of opsOf[Kind]
	Value  string // put, cas: the value written
	Expect string // cas: the value compared against
	Addr   string // add, remove: the address
	// CallUs and ReturnUs bound the operation; for an unknown outcome ReturnUs is
	// when the client gave up, and the checks treat the return as never.
	CallUs   int64
	ReturnUs int64
	Status   Status
	Error    string   // the client's error text, shown
	Found    bool     // get, get_consistent: whether the item existed
	Read     string   // get, get_consistent: the value read, when found
	Addrs    []string // list: the addresses, as a set
}

// isWrite tells whether an operation can change its object.
func (o *Op) isWrite() bool {
	switch o.Op {
	case opPut, opDelete, opCas, opAdd, opRemove:
		return true
	}
	return false
}

// The file's JSON shape. Pointers mark what must be present, so that a missing
// field is named rather than read as zero.
type wireHistory struct {
	Seed   *int64      `json:"seed"`
	LagMs  *int64      `json:"lag_ms"`
	Faults []wireFault `json:"faults"`
	Ops    *[]wireOp   `json:"ops"`
}

type wireFault struct {
	Node   *int   `json:"node"`
	Kind   string `json:"kind"`
	FromUs *int64 `json:"from_us"`
	ToUs   *int64 `json:"to_us"`
}

type wireOp struct {
	ID       *int64    `json:"id"`
	Client   *int      `json:"client"`
	Node     *int      `json:"node"`
	Face     string    `json:"face"`
	Kind     string    `json:"kind"`
	Key      string    `json:"key"`
	Op       string    `json:"op"`
	Value    string    `json:"value"`
	Expect   string    `json:"expect"`
	Addr     string    `json:"addr"`
	CallUs   *int64    `json:"call_us"`
	ReturnUs *int64    `json:"return_us"`
	Status   string    `json:"status"`
	Error    string    `json:"error"`
	Found    *bool     `json:"found"`
	Read     *string   `json:"read"`
	Addrs    *[]string `json:"addrs"`
}

// decodeHistory reads a history and checks it is complete and consistent. Unknown
// fields are refused: a writer that drifted from this format should hear about it,
// not have its new field ignored.
func decodeHistory(data []byte) (*History, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireHistory
	if err := dec.Decode(&w); err != nil {
		return nil, describeJSONError(data, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the history object")
	}
	if w.Seed == nil {
		return nil, errors.New(`"seed" is missing`)
	}
	if w.LagMs == nil {
		return nil, errors.New(`"lag_ms" is missing`)
	}
	if *w.LagMs < 0 {
		return nil, fmt.Errorf(`"lag_ms" is %d: it must be 0 or more`, *w.LagMs)
	}
	if w.Ops == nil {
		return nil, errors.New(`"ops" is missing`)
	}
	h := &History{Seed: *w.Seed, LagMs: *w.LagMs}
	for i, f := range w.Faults {
		fault, err := f.fault()
		if err != nil {
			return nil, fmt.Errorf("faults[%d]: %w", i, err)
		}
		h.Faults = append(h.Faults, fault)
	}
	ids := make(map[int64]int, len(*w.Ops))
	writerOf := make(map[string]int64) // value -> id of the op that wrote it
	for i, wo := range *w.Ops {
		op, err := wo.op()
		if err != nil {
			if wo.ID != nil {
				return nil, fmt.Errorf("ops[%d] (id %d): %w", i, *wo.ID, err)
			}
			return nil, fmt.Errorf("ops[%d]: %w", i, err)
		}
		if j, dup := ids[op.ID]; dup {
			return nil, fmt.Errorf(`ops[%d]: "id" %d is also the id of ops[%d]`, i, op.ID, j)
		}
		ids[op.ID] = i
		// The checks find a read's write by its value: two writes of one value
		// would make that ambiguous.
		if op.Op == opPut || op.Op == opCas {
			if other, dup := writerOf[op.Value]; dup {
				return nil, fmt.Errorf(`ops[%d] (id %d): "value" %q was also written by id %d; written values must be unique`,
					i, op.ID, op.Value, other)
			}
			writerOf[op.Value] = op.ID
		}
		h.Ops = append(h.Ops, op)
	}
	return h, nil
}

func (f wireFault) fault() (Fault, error) {
	switch {
	case f.Node == nil:
		return Fault{}, errors.New(`"node" is missing`)
	case *f.Node < 1:
		return Fault{}, fmt.Errorf(`"node" is %d: nodes are numbered from 1`, *f.Node)
	case f.Kind == "":
		return Fault{}, errors.New(`"kind" is missing`)
	case f.FromUs == nil:
		return Fault{}, errors.New(`"from_us" is missing`)
	case f.ToUs == nil:
		return Fault{}, errors.New(`"to_us" is missing`)
	case *f.ToUs < *f.FromUs:
		return Fault{}, fmt.Errorf(`"to_us" %d is before "from_us" %d`, *f.ToUs, *f.FromUs)
	}
	return Fault{Node: *f.Node, Kind: f.Kind, FromUs: *f.FromUs, ToUs: *f.ToUs}, nil
}

// op checks one operation's fields against what its kind, op and status need.
func (w wireOp) op() (*Op, error) {
	switch {
	case w.ID == nil:
		return nil, errors.New(`"id" is missing`)
	case w.Client == nil:
		return nil, errors.New(`"client" is missing`)
	case *w.Client < 0:
		return nil, fmt.Errorf(`"client" is %d: it must be 0 or more`, *w.Client)
	case w.Node == nil:
		return nil, errors.New(`"node" is missing`)
	case *w.Node < 1:
		return nil, fmt.Errorf(`"node" is %d: nodes are numbered from 1`, *w.Node)
	case w.Face != "http" && w.Face != "grpc":
		return nil, fmt.Errorf(`"face" is %q: it must be "http" or "grpc"`, w.Face)
	case w.Key == "":
		return nil, errors.New(`"key" is missing`)
	case w.CallUs == nil:
		return nil, errors.New(`"call_us" is missing`)
	case w.ReturnUs == nil:
		return nil, errors.New(`"return_us" is missing`)
	case *w.ReturnUs < *w.CallUs:
		return nil, fmt.Errorf(`"return_us" %d is before "call_us" %d`, *w.ReturnUs, *w.CallUs)
	}
	ops, ok := opsOf[w.Kind]
	if !ok {
		return nil, fmt.Errorf(`"kind" is %q: it must be %q or %q`, w.Kind, kindConfig, kindInstances)
	}
	if !slices.Contains(ops, w.Op) {
		return nil, fmt.Errorf(`"op" is %q: a %s op is one of %q`, w.Op, w.Kind, ops)
	}
	status := Status(w.Status)
	if !slices.Contains(statuses, status) {
		return nil, fmt.Errorf(`"status" is %q: it must be "ok", "fail", "unknown" or "refused"`, w.Status)
	}
	op := &Op{
		ID: *w.ID, Client: *w.Client, Node: *w.Node, Face: w.Face,
		Kind: w.Kind, Key: w.Key, Op: w.Op,
		Value: w.Value, Expect: w.Expect, Addr: w.Addr,
		CallUs: *w.CallUs, ReturnUs: *w.ReturnUs,
		Status: status, Error: w.Error,
	}
	switch w.Op {
	case opPut:
		if w.Value == "" {
			return nil, errors.New(`"value" is missing (a put writes one)`)
		}
	case opCas:
		if w.Value == "" {
			return nil, errors.New(`"value" is missing (a cas writes one)`)
		}
		if w.Expect == "" {
			return nil, errors.New(`"expect" is missing (a cas compares against it)`)
		}
	case opAdd, opRemove:
		if w.Addr == "" {
			return nil, fmt.Errorf(`"addr" is missing (an %s names one)`, w.Op)
		}
	case opGet, opGetConsistent:
		// Only an answered read has a result; the checks drop the others.
		if status != StatusOK {
			break
		}
		if w.Found == nil {
			return nil, errors.New(`"found" is missing (an ok read says whether the item existed)`)
		}
		op.Found = *w.Found
		if op.Found {
			// An empty value is taken as read: no write has it, so the checks
			// refuse it and show the read, which says more than a format error.
			if w.Read == nil {
				return nil, errors.New(`"read" is missing (an ok read that found the item has its value)`)
			}
			op.Read = *w.Read
		}
	case opList:
		if status != StatusOK {
			break
		}
		if w.Addrs == nil {
			return nil, errors.New(`"addrs" is missing (an ok list has the addresses, [] for none)`)
		}
		// A set: order and repeats carry no meaning, so keep one sorted copy.
		op.Addrs = slices.Compact(slices.Sorted(slices.Values(*w.Addrs)))
	}
	return op, nil
}

// describeJSONError turns the decoder's error into one that names the field, or
// the line and column where the syntax broke.
func describeJSONError(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line, col := position(data, syntax.Offset)
		return fmt.Errorf("not JSON at line %d, column %d: %v", line, col, syntax)
	case errors.As(err, &typ):
		line, col := position(data, typ.Offset)
		return fmt.Errorf("%q at line %d, column %d is a JSON %s; it must be %s",
			typ.Field, line, col, typ.Value, typ.Type)
	case errors.Is(err, io.EOF):
		return errors.New("the file is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the file ends inside the history object")
	}
	return err
}

// position is the 1-based line and column of the last byte the decoder read
// before it stopped: offset counts the bytes read, the culprit included.
func position(data []byte, offset int64) (line, col int) {
	at := int(min(max(offset-1, 0), int64(len(data))))
	before := data[:at]
	line = bytes.Count(before, []byte("\n")) + 1
	col = at - bytes.LastIndexByte(before, '\n')
	return line, col
}
