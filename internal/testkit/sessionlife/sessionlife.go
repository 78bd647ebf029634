// Package sessionlife replays a real agent conversation turn by turn as an
// agent platform would: the conversation grows by one turn at a time,
// and each time it reaches a share of the model's limit it is sent for
// compaction; the next turns continue from the compacted output. It
// measures what one compaction cannot show: whether a long session keeps
// being compacted (never locked out), whether earlier summaries survive
// verbatim, how much of each output an agent's prompt cache still holds,
// and what the agent knows at the end.
//
// It is pure: the caller hands it a function that compacts (the e2e tests
// call the gateway, the bench the HTTP API).
package sessionlife

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Event is one compaction the replay asks for.
type Event struct {
	// N counts the session's events from 1.
	N int
	// Data is the whole conversation in its wire format.
	Data []byte
	// Base is the previous event's outcome (nil for the first), and
	// Appended the messages the agent added to its output since: what an
	// incremental event sends (MessagesJSON) instead of Data.
	Base     *contract.Outcome
	Appended []conversation.Message
	Format   conversation.Format
	// New is how many bytes Data grew by since the previous output (both
	// rendered alike): what the agent appended, as a whole upload carries
	// it.
	New int
}

// Compactor compacts an event's conversation and returns the run's
// outcome and its output's bytes.
type Compactor func(ctx context.Context, ev Event) (contract.Outcome, []byte, error)

// MessagesJSON renders msgs as the JSON array of messages of format (the
// "messages" of an OpenAI or Anthropic request): an incremental event's
// messages.
func MessagesJSON(format conversation.Format, msgs []conversation.Message) (json.RawMessage, error) {
	data, err := conversation.Render(conversation.Conversation{Format: format, Messages: msgs})
	if err != nil {
		return nil, fmt.Errorf("render appended messages: %w", err)
	}
	var doc struct {
		Messages json.RawMessage `json:"messages"`
	}
	if len(data) > 0 && data[0] == '[' {
		return data, nil
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Messages) == 0 {
		return nil, fmt.Errorf("render appended messages: no message list in %s", format)
	}
	return doc.Messages, nil
}

// Options shape a replay.
type Options struct {
	// Limit is the agent's context limit, in Counter's unit.
	Limit int
	// Trigger is the share of Limit at which the platform sends an event
	// (by its own estimate, Counter).
	Trigger float64
	Counter tokens.Counter
	// Compactions stops the replay after this many events; 0: when the
	// source's turns run out.
	Compactions int
	// Cycle replays the source's turns again (with fresh tool call ids)
	// when they run out before Compactions: a session longer than any
	// recorded one.
	Cycle bool
}

// Compaction is what one event of the replay gave.
type Compaction struct {
	Outcome contract.Outcome
	// Sent is the size of the conversation sent, in bytes, and New the
	// bytes it grew by since the previous output.
	Sent, New int
	// Output is the compacted conversation.
	Output conversation.Conversation
}

// Result is a whole replay.
type Result struct {
	Compactions []Compaction
	// Final is the conversation the agent holds at the end: the last
	// output with the turns that followed it.
	Final conversation.Conversation
	// Original is every turn the agent saw, uncompacted: what probes are
	// derived from.
	Original conversation.Conversation
	// Skipped counts turns the replay leaves out: those larger than the
	// whole limit on their own (a final diff of 880K characters in one
	// user message), which no agent on this model could have held, and a
	// last call the recording never answered, which a later turn would
	// leave unpaired.
	Skipped int
}

// Turns splits a conversation's messages after its head (system and the
// first user message) into turns: an assistant message and the tool
// results and user messages that follow it, so that appending whole turns
// keeps every call with its result.
func Turns(c conversation.Conversation) (head []conversation.Message, turns [][]conversation.Message) {
	i := 0
	for i < len(c.Messages) && c.Messages[i].Role == conversation.RoleSystem {
		i++
	}
	for i < len(c.Messages) && c.Messages[i].Role != conversation.RoleAssistant {
		i++
	}
	head = c.Messages[:i]
	for i < len(c.Messages) {
		j := i + 1
		for j < len(c.Messages) && c.Messages[j].Role != conversation.RoleAssistant {
			j++
		}
		turns = append(turns, c.Messages[i:j])
		i = j
	}
	return head, turns
}

// answered reports whether every call of turn has its result in it.
func answered(turn []conversation.Message) bool {
	calls := map[string]bool{}
	for _, m := range turn {
		for _, b := range m.Blocks {
			switch b.Kind {
			case conversation.KindToolUse:
				calls[b.ToolID] = true
			case conversation.KindToolResult:
				delete(calls, b.ToolID)
			}
		}
	}
	return len(calls) == 0
}

// renamed is turn with every tool call id given suffix, so that a cycled
// turn never repeats an id the conversation already holds.
func renamed(turn []conversation.Message, suffix string) []conversation.Message {
	out := make([]conversation.Message, len(turn))
	for i, m := range turn {
		m = m.Clone()
		for j := range m.Blocks {
			if m.Blocks[j].ToolID != "" {
				m.Blocks[j].ToolID += suffix
			}
		}
		out[i] = m
	}
	return out
}

// Replay runs src's session against compact.
func Replay(ctx context.Context, src conversation.Conversation, o Options, compact Compactor) (Result, error) {
	if o.Limit <= 0 || o.Trigger <= 0 || o.Counter == nil {
		return Result{}, fmt.Errorf("sessionlife: limit, trigger and counter are required")
	}
	head, turns := Turns(src)
	if len(turns) == 0 {
		return Result{}, fmt.Errorf("sessionlife: the conversation has no assistant turn")
	}
	cur := src
	cur.Messages = append([]conversation.Message(nil), head...)
	orig := cur
	orig.Messages = append([]conversation.Message(nil), head...)
	var res Result
	// prevLen is the size of the conversation the previous event left,
	// rendered as the replay renders the next one.
	prevLen := 0
	var base *contract.Outcome
	var appended []conversation.Message
	for cycle, k := 0, 0; ; k++ {
		if k == len(turns) {
			if !o.Cycle || o.Compactions == 0 {
				break
			}
			cycle, k = cycle+1, 0
		}
		turn := turns[k]
		if cycle > 0 {
			turn = renamed(turn, fmt.Sprintf("-c%d", cycle))
		}
		size := 0
		for _, m := range turn {
			size += tokens.Message(o.Counter, m)
		}
		if size > o.Limit || !answered(turn) {
			res.Skipped++
			continue
		}
		cur.Messages = append(cur.Messages, turn...)
		orig.Messages = append(orig.Messages, turn...)
		appended = append(appended, turn...)
		if float64(tokens.Conversation(o.Counter, cur)) < o.Trigger*float64(o.Limit) {
			continue
		}
		data, err := conversation.Render(cur)
		if err != nil {
			return res, fmt.Errorf("render event %d: %w", len(res.Compactions)+1, err)
		}
		ev := Event{N: len(res.Compactions) + 1, Data: data, Base: base, Format: cur.Format, New: len(data) - prevLen}
		if base != nil {
			ev.Appended = appended
		}
		out, outData, err := compact(ctx, ev)
		if err != nil {
			return res, fmt.Errorf("event %d: %w", len(res.Compactions)+1, err)
		}
		c := Compaction{Outcome: out, Sent: len(data), New: ev.New}
		if len(outData) > 0 {
			if c.Output, err = conversation.Parse(outData, cur.Format); err != nil {
				return res, fmt.Errorf("event %d: parse output: %w", len(res.Compactions)+1, err)
			}
			cur = c.Output
			if rendered, err := conversation.Render(cur); err == nil {
				prevLen = len(rendered)
			}
			o := out
			base, appended = &o, nil
		}
		res.Compactions = append(res.Compactions, c)
		if o.Compactions > 0 && len(res.Compactions) >= o.Compactions {
			break
		}
	}
	res.Final, res.Original = cur, orig
	return res, nil
}

// Blocks are the session log blocks of c: the text blocks that open with
// a log block's delimiter (strategy.LogBlockOpening), in order.
func Blocks(c conversation.Conversation) []string {
	var out []string
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindText && strategy.IsLogBlock(b.Text) {
				out = append(out, b.Text)
			}
		}
	}
	return out
}
