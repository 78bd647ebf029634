package conversation

import "fmt"

// Tool ids are matched positionally: a tool result answers the most recent
// earlier tool use with its id that has no result yet. Ids may therefore be
// reused once the earlier call has its result; real data does this (the
// tau-bench trajectories repeat OpenAI call ids), so an id alone does not
// name a call. A tool use whose id is still awaiting a result is a
// duplicate.

// toolTracker applies the pairing rule while a parser walks the source, so
// that parse errors name the source position.
type toolTracker struct {
	open     map[string]openCall // id -> call awaiting its result
	answered map[string]int      // id -> source message of the latest result
}

type openCall struct {
	index int
	name  string
}

func newToolTracker() *toolTracker {
	return &toolTracker{open: map[string]openCall{}, answered: map[string]int{}}
}

// use records a tool call at a source message.
func (t *toolTracker) use(id, name string, index int, fieldPath string) *Error {
	if id == "" {
		return errAt(index, fieldPath, "tool call id must not be empty")
	}
	if prev, ok := t.open[id]; ok {
		return errAt(index, fieldPath, "duplicate tool call id %q: the call in message %d with this id has no result yet", id, prev.index)
	}
	t.open[id] = openCall{index: index, name: name}
	return nil
}

// result records a tool result and returns the name of the call it answers.
func (t *toolTracker) result(id string, index int, fieldPath string) (string, *Error) {
	if id == "" {
		return "", errAt(index, fieldPath, "tool call id must not be empty")
	}
	call, ok := t.open[id]
	if !ok {
		if at, seen := t.answered[id]; seen {
			return "", errAt(index, fieldPath, "tool call %q already has its result in message %d", id, at)
		}
		return "", errAt(index, fieldPath, "no earlier tool call has id %q", id)
	}
	delete(t.open, id)
	t.answered[id] = index
	return call.name, nil
}

// Pos is the place of a block: Messages[Msg].Blocks[Block].
type Pos struct {
	Msg   int
	Block int
}

// NoPos marks a missing side of a ToolPair.
var NoPos = Pos{Msg: -1, Block: -1}

// Valid reports whether the position points somewhere (is not NoPos).
func (p Pos) Valid() bool { return p.Msg >= 0 }

// ToolPair is one tool call and its result.
type ToolPair struct {
	// ID is the tool id shared by both sides.
	ID string
	// Use is the tool_use block; NoPos for a result without a call.
	Use Pos
	// Result is the tool_result block; NoPos while the call has none.
	Result Pos
	// Pending is true for a call without a result that is allowed to have
	// none yet: it sits in the last message that is not made only of tool
	// results, so the caller is still waiting for it. Pending calls must
	// never be cut.
	Pending bool
}

// ToolIndex pairs every tool use with its result.
type ToolIndex struct {
	// Pairs lists the pairs in order of their first block.
	Pairs []ToolPair
	at    map[Pos]int
}

// Pair returns the pair a tool_use or tool_result block at p belongs to.
func (x ToolIndex) Pair(p Pos) (ToolPair, bool) {
	i, ok := x.at[p]
	if !ok {
		return ToolPair{}, false
	}
	return x.Pairs[i], true
}

// ToolIndex pairs the tool uses and results of the conversation (see the
// pairing rule above: positional, ids may be reused after their result). A
// result with no open call gets a pair with Use == NoPos; a use whose id was
// already open leaves the earlier call unanswered. CheckPairing turns those
// cases into errors.
func (c Conversation) ToolIndex() ToolIndex {
	x := ToolIndex{at: map[Pos]int{}}
	open := map[string]int{}
	for i, m := range c.Messages {
		for j, b := range m.Blocks {
			p := Pos{Msg: i, Block: j}
			switch b.Kind {
			case KindToolUse:
				open[b.ToolID] = len(x.Pairs)
				x.at[p] = len(x.Pairs)
				x.Pairs = append(x.Pairs, ToolPair{ID: b.ToolID, Use: p, Result: NoPos})
			case KindToolResult:
				if k, ok := open[b.ToolID]; ok {
					delete(open, b.ToolID)
					x.Pairs[k].Result = p
					x.at[p] = k
					continue
				}
				x.at[p] = len(x.Pairs)
				x.Pairs = append(x.Pairs, ToolPair{ID: b.ToolID, Use: NoPos, Result: p})
			}
		}
	}
	last := c.lastNonResultMessage()
	for k := range x.Pairs {
		pr := &x.Pairs[k]
		pr.Pending = pr.Use.Valid() && !pr.Result.Valid() && pr.Use.Msg == last
	}
	return x
}

// lastNonResultMessage is the index of the last message holding anything
// besides tool results, or -1.
func (c Conversation) lastNonResultMessage() int {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if !c.Messages[i].resultsOnly() {
			return i
		}
	}
	return -1
}

// resultsOnly reports whether a message holds tool results and nothing else.
func (m Message) resultsOnly() bool {
	if len(m.Blocks) == 0 {
		return false
	}
	for _, b := range m.Blocks {
		if b.Kind != KindToolResult {
			return false
		}
	}
	return true
}

// PairingError reports a broken tool pairing found by CheckPairing.
type PairingError struct {
	// Index is the message index in Conversation.Messages.
	Index int
	// Block is the block index inside that message.
	Block int
	// ToolID is the tool id concerned.
	ToolID string
	// Reason says what is wrong.
	Reason string
}

// Error formats as `message 5: block 0: tool "call_1": no earlier tool use
// awaits this result`.
func (e *PairingError) Error() string {
	return fmt.Sprintf("message %d: block %d: tool %q: %s", e.Index, e.Block, e.ToolID, e.Reason)
}

// CheckPairing verifies the invariant every strategy must keep: each tool
// result answers an earlier tool use, no tool use id is reused while it is
// still awaiting its result, no call gets two results, and every tool use
// has its result except the pending calls of the last message that is not
// made only of tool results (a trailing call awaiting its result). It
// returns the first problem in conversation order as a *PairingError, or
// nil.
func CheckPairing(c Conversation) error {
	open := map[string]Pos{}
	for i, m := range c.Messages {
		for j, b := range m.Blocks {
			switch b.Kind {
			case KindToolUse:
				if b.ToolID == "" {
					return &PairingError{Index: i, Block: j, Reason: "tool use has no id"}
				}
				if prev, ok := open[b.ToolID]; ok {
					return &PairingError{Index: i, Block: j, ToolID: b.ToolID,
						Reason: fmt.Sprintf("duplicate tool use id: the call in message %d still awaits its result", prev.Msg)}
				}
				open[b.ToolID] = Pos{Msg: i, Block: j}
			case KindToolResult:
				if _, ok := open[b.ToolID]; !ok {
					return &PairingError{Index: i, Block: j, ToolID: b.ToolID,
						Reason: "tool result has no earlier tool use awaiting it"}
				}
				delete(open, b.ToolID)
			}
		}
	}
	last := c.lastNonResultMessage()
	var first *PairingError
	for id, p := range open {
		if p.Msg == last {
			continue
		}
		if first == nil || p.Msg < first.Index || (p.Msg == first.Index && p.Block < first.Block) {
			first = &PairingError{Index: p.Msg, Block: p.Block, ToolID: id, Reason: "tool use has no result"}
		}
	}
	if first != nil {
		return first
	}
	return nil
}
