package conversation

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// gen builds random but mostly well-formed documents of each format, so that
// the round-trip property is exercised on deep structure that byte-level
// fuzzing rarely reaches. Every optional field is sometimes absent, null,
// empty, of another type, or joined by unknown fields.
type gen struct {
	r   *rand.Rand
	ids []string // tool ids awaiting a result
	n   int
}

func (g *gen) pick(n int) int        { return g.r.IntN(n) }
func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) text() string {
	return [...]string{"", "x", "hello world", "line\nbreak\ttab", "<b>&amp;</b>", "é 😀 \u2028", `quote " backslash \`}[g.pick(7)]
}

func (g *gen) scalar() any {
	return [...]any{nil, true, false, 0, 1.5, -3, "s", []any{}, map[string]any{}, []any{1, "a", nil}, map[string]any{"k": "v", "n": []any{map[string]any{}}}}[g.pick(11)]
}

// extras adds unknown fields to an object.
func (g *gen) extras(m map[string]any) map[string]any {
	for i := g.pick(3); i > 0; i-- {
		m[fmt.Sprintf("x_%d", g.pick(4))] = g.scalar()
	}
	return m
}

func (g *gen) newID() string {
	g.n++
	if g.chance(0.1) && g.n > 1 {
		return fmt.Sprintf("id%d", g.pick(g.n)) // may reuse or duplicate
	}
	return fmt.Sprintf("id%d", g.n)
}

func (g *gen) resultID() string {
	if len(g.ids) == 0 || g.chance(0.05) {
		return "unknown"
	}
	k := g.pick(len(g.ids))
	id := g.ids[k]
	g.ids = append(g.ids[:k], g.ids[k+1:]...)
	return id
}

func (g *gen) openAIPart() any {
	switch g.pick(4) {
	case 0, 1:
		return g.extras(map[string]any{"type": "text", "text": g.text()})
	case 2:
		return g.extras(map[string]any{"type": "image_url", "image_url": map[string]any{"url": "u"}})
	default:
		return g.extras(map[string]any{"type": "input_audio", "input_audio": g.scalar()})
	}
}

func (g *gen) openAIContent(m map[string]any) {
	switch g.pick(6) {
	case 0:
	case 1:
		m["content"] = nil
	case 2, 3:
		m["content"] = g.text()
	default:
		parts := []any{}
		for i := g.pick(3); i >= 0; i-- {
			parts = append(parts, g.openAIPart())
		}
		m["content"] = parts
	}
}

func (g *gen) openAIMessage() any {
	roles := [...]string{"system", "developer", "user", "user", "assistant", "assistant", "tool", "tool"}
	role := roles[g.pick(len(roles))]
	if role == "tool" && len(g.ids) == 0 {
		role = "assistant"
	}
	m := g.extras(map[string]any{"role": role})
	if g.chance(0.2) {
		m["name"] = g.scalar()
	}
	switch role {
	case "tool":
		m["tool_call_id"] = g.resultID()
		if g.chance(0.8) {
			m["content"] = g.text()
		} else {
			m["content"] = []any{g.openAIPart(), g.openAIPart()}
		}
	case "assistant":
		g.openAIContent(m)
		switch g.pick(4) {
		case 0:
		case 1:
			m["tool_calls"] = []any{}
		default:
			calls := []any{}
			for i := g.pick(2); i >= 0; i-- {
				id := g.newID()
				g.ids = append(g.ids, id)
				fn := g.extras(map[string]any{"name": "f", "arguments": g.text()})
				call := g.extras(map[string]any{"id": id, "function": fn})
				if g.chance(0.8) {
					call["type"] = "function"
				}
				calls = append(calls, call)
			}
			m["tool_calls"] = calls
		}
	default:
		g.openAIContent(m)
		if g.chance(0.1) {
			m["tool_calls"] = nil
		}
	}
	return m
}

func (g *gen) anthropicBlock(role string) any {
	switch g.pick(8) {
	case 0, 1:
		return g.extras(map[string]any{"type": "text", "text": g.text()})
	case 2:
		if role == "assistant" {
			id := g.newID()
			g.ids = append(g.ids, id)
			return g.extras(map[string]any{"type": "tool_use", "id": id, "name": "n", "input": g.scalar()})
		}
		b := g.extras(map[string]any{"type": "tool_result", "tool_use_id": g.resultID()})
		switch g.pick(5) {
		case 0:
		case 1:
			b["content"] = nil
		case 2:
			b["content"] = []any{map[string]any{"type": "text", "text": g.text()}, map[string]any{"type": "image", "source": g.scalar()}}
		default:
			b["content"] = g.text()
		}
		if g.chance(0.5) {
			b["is_error"] = [...]any{true, false, nil}[g.pick(3)]
		}
		return b
	case 3:
		return g.extras(map[string]any{"type": "thinking", "thinking": g.text(), "signature": "sig"})
	case 4:
		return g.extras(map[string]any{"type": "redacted_thinking", "data": "d"})
	case 5:
		return g.extras(map[string]any{"type": "image", "source": g.scalar()})
	default:
		return g.extras(map[string]any{"type": "document", "source": g.scalar()})
	}
}

func (g *gen) anthropicDoc(n int) any {
	msgs := []any{}
	role := "assistant"
	for i := 0; i < n; i++ {
		// Mostly alternating, as the API wants; sometimes the same role
		// twice in a row, which Render merges.
		if i == 0 || !g.chance(0.2) {
			role = map[string]string{"user": "assistant", "assistant": "user"}[role]
		}
		m := g.extras(map[string]any{"role": role})
		if g.chance(0.3) {
			m["content"] = g.text()
		} else {
			blocks := []any{}
			for k := g.pick(3); k >= 0; k-- {
				blocks = append(blocks, g.anthropicBlock(role))
			}
			m["content"] = blocks
		}
		msgs = append(msgs, m)
	}
	if g.chance(0.2) {
		return msgs
	}
	doc := g.extras(map[string]any{"messages": msgs})
	switch g.pick(4) {
	case 0:
	case 1:
		doc["system"] = g.text()
	case 2:
		doc["system"] = []any{g.extras(map[string]any{"type": "text", "text": g.text()})}
	default:
		doc["system"] = nil
	}
	return doc
}

func (g *gen) reactDoc(n int) any {
	turns := []any{}
	for i := 0; i < n; i++ {
		t := g.extras(map[string]any{})
		if g.chance(0.9) {
			t["thought"] = [...]any{g.text(), nil}[g.pick(2)]
		}
		if g.chance(0.9) {
			t["action"] = [...]any{map[string]any{"tool": "t", "args": g.scalar()}, map[string]any{"name": 3}, g.scalar()}[g.pick(3)]
		}
		if g.chance(0.9) {
			t["result"] = [...]any{g.text(), g.scalar()}[g.pick(2)]
		}
		turns = append(turns, t)
	}
	if g.chance(0.2) {
		return turns
	}
	doc := g.extras(map[string]any{"metadata": g.scalar(), "reasoning_trace": []any{"a"}})
	switch g.pick(5) {
	case 0:
	case 1:
		doc["execution"] = nil
	case 2:
		doc["execution"] = g.extras(map[string]any{"final_response": g.text(), "tool_calls": nil})
	default:
		doc["execution"] = g.extras(map[string]any{"final_response": g.text(), "tool_calls": turns})
	}
	return doc
}

// TestRoundTripProperty generates documents from fixed seeds and checks the
// fuzz property on each, and that a fair share of them parse at all.
func TestRoundTripProperty(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{FormatOpenAI, FormatAnthropic, FormatReAct} {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			accepted, merged := 0, 0
			const runs = 3000
			for seed := uint64(0); seed < runs; seed++ {
				g := &gen{r: rand.New(rand.NewPCG(seed, uint64(len(f))))}
				n := g.pick(7)
				var doc any
				switch f {
				case FormatOpenAI:
					msgs := []any{}
					for i := 0; i < n; i++ {
						msgs = append(msgs, g.openAIMessage())
					}
					doc = msgs
					if g.chance(0.7) {
						doc = g.extras(map[string]any{"messages": msgs})
					}
				case FormatAnthropic:
					doc = g.anthropicDoc(n)
				case FormatReAct:
					doc = g.reactDoc(n)
				}
				data, err := json.Marshal(doc)
				require.NoError(t, err)
				if c, err := Parse(data, f); err == nil {
					accepted++
					if len(c.MergeSameRole().Messages) < len(c.Messages) {
						merged++
					}
				}
				fuzzRoundTrip(t, data, f)
			}
			t.Logf("accepted %d of %d, merged %d", accepted, runs, merged)
			require.Greater(t, accepted, runs/5, "the generator should produce mostly valid documents")
			if f == FormatAnthropic {
				require.Greater(t, merged, runs/20, "the generator should produce same-role neighbours")
			}
		})
	}
}
