// The sequential specifications porcupine checks against: a register per config
// item and a set of addresses per service, one key at a time.
//
// Porcupine gives every operation an input and an output; here both are the
// recorded *Op (its arguments are the input, its status and result the output).
// States are values, never mutated: porcupine keeps old states on its search stack.

package main

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// register is the state of one config item.
type register struct {
	present bool
	value   string
}

// configModel is a config item: put, delete and cas change it, get_consistent
// reads it. Operations that definitely did not happen (fail, other than cas)
// are dropped before they reach the model.
func configModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return register{} },
		Step: func(state, input, _ any) (bool, any) {
			return stepRegister(state.(register), input.(*Op))
		},
		// register is comparable, so porcupine's default == is the right equality.
		Hash: func(state any) uint64 {
			s := state.(register)
			h := fnv.New64a()
			if s.present {
				h.Write([]byte{1})
				h.Write([]byte(s.value))
			}
			return h.Sum64()
		},
		DescribeOperation:         describeOperation,
		DescribeState:             func(state any) string { return describeRegister(state.(register)) },
		DescribeOperationMetadata: describeMetadata,
	}
}

// stepRegister is one step of the register: whether op can happen in state s,
// and the state after it.
func stepRegister(s register, op *Op) (bool, register) {
	switch op.Op {
	case opPut:
		// Ok or unknown: an unknown put that took effect did so here; one that did
		// not is linearized at the end, where nothing sees it.
		return true, register{present: true, value: op.Value}
	case opDelete:
		// Deleting an absent item succeeds too.
		return true, register{}
	case opCas:
		holds := s.present && s.value == op.Expect
		switch op.Status {
		case StatusOK:
			if !holds {
				return false, s
			}
			return true, register{present: true, value: op.Value}
		case StatusFail:
			// A failed cas is an observation: the item did not hold expect here.
			return !holds, s
		default:
			// Unknown: the server compared if the request reached it, so the cas
			// takes effect exactly when the compare holds at its point.
			if holds {
				return true, register{present: true, value: op.Value}
			}
			return true, s
		}
	case opGetConsistent:
		ok := op.Found == s.present && (!op.Found || op.Read == s.value)
		return ok, s
	}
	// Plain gets never reach porcupine; anything else is a bug in the partitioning.
	panic(fmt.Sprintf("config model given a %q op", op.Op))
}

// addrSet is the state of one service: its addresses, sorted, without repeats.
type addrSet []string

// instancesModel is a service's set of addresses: add and remove change it, list
// reads it whole.
func instancesModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return addrSet(nil) },
		Step: func(state, input, _ any) (bool, any) {
			return stepSet(state.(addrSet), input.(*Op))
		},
		Equal: func(a, b any) bool { return slices.Equal(a.(addrSet), b.(addrSet)) },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			for _, addr := range state.(addrSet) {
				h.Write([]byte(addr))
				h.Write([]byte{0})
			}
			return h.Sum64()
		},
		DescribeOperation: describeOperation,
		DescribeState: func(state any) string {
			return "{" + strings.Join(state.(addrSet), ", ") + "}"
		},
		DescribeOperationMetadata: describeMetadata,
	}
}

// stepSet is one step of the set; it copies rather than mutates s.
func stepSet(s addrSet, op *Op) (bool, addrSet) {
	i, present := slices.BinarySearch(s, op.Addr)
	switch op.Op {
	case opAdd:
		if present {
			return true, s
		}
		return true, slices.Insert(slices.Clip(s), i, op.Addr)
	case opRemove:
		if !present {
			return true, s
		}
		return true, slices.Delete(slices.Clone(s), i, i+1)
	case opList:
		// Op.Addrs is sorted and compacted when the history is read.
		return slices.Equal(s, op.Addrs), s
	}
	panic(fmt.Sprintf("instances model given a %q op", op.Op))
}

// describeOperation is the text of an operation's box in the visualization.
func describeOperation(input, _ any) string {
	op := input.(*Op)
	text := op.Op
	if args := describeArgs(op); args != "" {
		text += "(" + args + ")"
	}
	return text + " → " + describeResult(op)
}

// describeMetadata is the tooltip line that ties a box to the history file.
func describeMetadata(meta any) string {
	op := meta.(*Op)
	// The visualization shows raw call and return times (µs, and for an unknown
	// outcome the end of the history); the tooltip adds the table's milliseconds.
	text := fmt.Sprintf("id %d, client %d, node %d (%s), called at %s ms, ",
		op.ID, op.Client, op.Node, op.Face, ms(op.CallUs))
	if op.Status == StatusUnknown {
		text += fmt.Sprintf("unknown: the client gave up at %s ms", ms(op.ReturnUs))
	} else {
		text += fmt.Sprintf("%s at %s ms", op.Status, ms(op.ReturnUs))
	}
	if op.Error != "" {
		text += " (" + op.Error + ")"
	}
	return text
}

func describeRegister(s register) string {
	if !s.present {
		return "absent"
	}
	return fmt.Sprintf("%q", s.value)
}
