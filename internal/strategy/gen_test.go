package strategy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// genConfig tunes the conversation generator.
type genConfig struct {
	format conversation.Format
	turns  int
}

var genWords = strings.Fields(`the a file test error path config value function return import module
request response token context session user agent tool result output line class def self data
json http status code build run pass fail check update write read patch diff commit`)

// genText returns about n characters of word soup in lines.
func genText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(genWords[r.IntN(len(genWords))])
		if r.IntN(9) == 0 {
			sb.WriteByte('\n')
		} else {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

func genSize(r *rand.Rand) int {
	switch r.IntN(4) {
	case 0:
		return 20 + r.IntN(80)
	case 1:
		return 200 + r.IntN(800)
	case 2:
		return 2000 + r.IntN(4000)
	default:
		return r.IntN(30)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// genCall returns a tool_use with a plausible input for a random tool.
func genCall(r *rand.Rand, id string) conversation.Block {
	path := fmt.Sprintf("src/pkg%d/file%d.go", r.IntN(5), r.IntN(50))
	switch r.IntN(9) {
	case 0:
		return use(id, "write_file", mustJSON(map[string]string{"path": path, "content": genText(r, genSize(r))}))
	case 1:
		return use(id, "Edit", mustJSON(map[string]string{"file_path": path, "old_string": genText(r, 40), "new_string": genText(r, genSize(r))}))
	case 2:
		return use(id, "str_replace_editor", mustJSON(map[string]string{"command": "create", "path": path, "file_text": genText(r, genSize(r))}))
	case 3:
		cmd := fmt.Sprintf("cat <<'EOF' > %s\n%s\nEOF", path, genText(r, genSize(r)))
		return use(id, "bash", mustJSON(map[string]string{"command": cmd}))
	case 4:
		return use(id, "deactivate_augments", mustJSON(map[string][]string{"patterns": {"refactoring/*"}}))
	case 5:
		return use(id, "mcp__nisaba__compress_to_checkpoint", `{}`)
	case 6:
		return use(id, "read_file", mustJSON(map[string]string{"path": path}))
	default:
		return use(id, "bash", mustJSON(map[string]string{"command": "grep -rn " + genWords[r.IntN(len(genWords))] + " ."}))
	}
}

// genConversation builds a valid conversation: optional system prompt, a
// task statement, turns of tool calls with their results (one role "tool"
// message per result for OpenAI, one user message of tool_result blocks
// for Anthropic), user follow-ups, pinned constraints, and sometimes a
// pending call at the end.
func genConversation(r *rand.Rand, cfg genConfig) conversation.Conversation {
	c := conversation.Conversation{Format: cfg.format}
	add := func(m conversation.Message) { c.Messages = append(c.Messages, m) }
	if r.IntN(10) < 7 {
		add(sysMsg("You are a careful coding agent. " + genText(r, 100)))
	}
	add(userMsg("Task: " + genText(r, 50+r.IntN(300))))
	next := 0
	newID := func() string {
		next++
		if cfg.format == conversation.FormatAnthropic {
			return fmt.Sprintf("toolu_%04d", next)
		}
		return fmt.Sprintf("call_%04d", next)
	}
	for range cfg.turns {
		switch r.IntN(10) {
		case 0:
			add(userMsg("[pinned] constraint: " + genText(r, 60)))
			continue
		case 1:
			add(userMsg(genText(r, 40+r.IntN(200))))
			continue
		case 2:
			add(asstMsg(genText(r, 40+r.IntN(200))))
			continue
		}
		var calls []conversation.Block
		for range 1 + r.IntN(3) {
			calls = append(calls, genCall(r, newID()))
		}
		text := ""
		if r.IntN(3) > 0 {
			text = genText(r, 20+r.IntN(150))
		}
		add(asstMsg(text, calls...))
		var results []conversation.Block
		for _, call := range calls {
			b := result(call.ToolID, genText(r, genSize(r)))
			if r.IntN(8) == 0 {
				b.IsError = true
			}
			results = append(results, b)
		}
		if cfg.format == conversation.FormatAnthropic {
			m := userResults(results...)
			if r.IntN(6) == 0 {
				m.Blocks = append(m.Blocks, textBlock("IMPORTANT: "+genText(r, 40)))
			}
			add(m)
		} else {
			for _, b := range results {
				add(conversation.Message{Role: conversation.RoleTool, Blocks: []conversation.Block{b}})
			}
		}
	}
	if r.IntN(10) < 3 {
		add(asstMsg("Next step.", genCall(r, newID())))
	}
	return c
}

// genCase is one generated conversation with a random protection.
type genCase struct {
	name string
	c    conversation.Conversation
	p    Protection
}

// genCases returns a deterministic batch of conversations in both shapes.
func genCases(seed uint64, n int) []genCase {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []genCase
	for i := range n {
		f := conversation.FormatOpenAI
		if i%2 == 1 {
			f = conversation.FormatAnthropic
		}
		c := genConversation(r, genConfig{format: f, turns: r.IntN(25)})
		p := Protection{
			System:    r.IntN(4) > 0,
			FirstUser: r.IntN(4) > 0,
			LastN:     r.IntN(6),
		}
		if r.IntN(3) > 0 {
			p.PinMarkers = DefaultPinMarkers
		}
		out = append(out, genCase{name: fmt.Sprintf("%s-%03d", f, i), c: c, p: p})
	}
	return out
}
