package plan

import (
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Report is what a preset would do to a conversation, without running any
// LLM: the deterministic passes are run for real, the LLM passes are
// listed.
type Report struct {
	Preset     string  `json:"preset"`
	Encoding   string  `json:"encoding"`
	Limit      int     `json:"context_limit"`
	SizeBefore int     `json:"size_before"`
	Usage      float64 `json:"usage"`
	Level      string  `json:"level"`
	Passes     []Pass  `json:"passes"`
	SizeAfter  int     `json:"size_after_deterministic"`
	UsageAfter float64 `json:"usage_after_deterministic"`
	// LargeResults is how many results would be map-reduced (the ReAct two-layer design
	// layer 1), GlobalResults how many compressed by layer 2.
	LargeResults  int `json:"large_results"`
	GlobalResults int `json:"global_results"`
	// History says whether the history would be summarized, and how many
	// messages the summary would replace.
	History        bool   `json:"history"`
	HistoryNote    string `json:"history_note"`
	Summarized     int    `json:"summarized_messages"`
	Recommendation string `json:"recommendation"`
	// Budget says what the budget ladder would do after the preset's
	// passes (its deterministic steps are run for real; the history step
	// is an LLM pass and only named).
	Budget string `json:"budget"`
	// Error is set when the preset cannot run on this input; the other
	// presets are still reported.
	Error string `json:"error,omitempty"`
}

// Inspect reports what preset p would do to conv for an agent on model
// with the given limit (0: the preset's or the model's).
func Inspect(conv conversation.Conversation, p policy.Preset, model string, limit int, limits tokens.Limits) (Report, error) {
	b, err := NewBudget(p, model, limit, limits)
	if err != nil {
		return Report{}, err
	}
	res, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: func(text string) string {
		return fmt.Sprintf("offload/%d", len(text))
	}})
	if err != nil {
		return Report{Preset: p.Name, Encoding: b.CounterName(), Limit: b.Limit, Error: err.Error()}, nil
	}
	usage := b.Usage(res.SizeBefore)
	r := Report{
		Preset: p.Name, Encoding: b.CounterName(), Limit: b.Limit, SizeBefore: res.SizeBefore,
		Usage: usage, Level: string(strategy.LevelFor(usage)), Passes: res.Passes,
		SizeAfter: res.SizeAfter, UsageAfter: b.Usage(res.SizeAfter), LargeResults: len(res.LargeResults),
	}
	if !res.Done {
		// Layer 2 and the history pass see the trajectory after layer 1
		// has map-reduced its huge results, as a run does.
		after, summarized := afterLayer1(res.Conv, p, res.LargeResults)
		targets, _ := GlobalTargets(after, p, b, summarized)
		r.GlobalResults = len(targets)
		d := History(after, p, b, res.SizeBefore-b.Measure(after), NotForced, LogView{})
		r.History, r.HistoryNote, r.Summarized = d.Run, d.Reason, d.Summarized
		if d.Run {
			// Named by its place in the caller's messages[], as every
			// index shown to a caller is.
			from := d.Split
			if pos := res.Conv.CallerIndexes(); d.Split < len(pos) && pos[d.Split] >= 0 {
				from = pos[d.Split]
			}
			r.HistoryNote = fmt.Sprintf("summarize %d messages, keep from message %d", d.Summarized, from)
			if d.Note != "" {
				r.HistoryNote += "; " + d.Note
			}
		}
	} else {
		r.HistoryNote = "target reached by the deterministic passes"
	}
	r.Recommendation = strategy.Recommendation(strategy.LevelFor(r.UsageAfter))
	r.Budget = inspectLadder(res.Conv, p, b)
	return r, nil
}

// afterLayer1 stands in for what layer 1 (the map-reduce of each huge
// result) leaves: each such result shrunk to its expected summary size
// (ratio of its characters, at most the second pass's bound), and the
// set of their places, which layer 2 leaves alone.
func afterLayer1(conv conversation.Conversation, p policy.Preset, large []strategy.ResultLoc) (conversation.Conversation, map[[2]int]bool) {
	if len(large) == 0 {
		return conv, nil
	}
	out := conv.Clone()
	done := map[[2]int]bool{}
	for _, r := range large {
		n := int(float64(r.Chars) * p.LargeResult.Ratio)
		if p.LargeResult.SecondPassAboveChars > 0 {
			n = min(n, p.LargeResult.SecondPassAboveChars)
		}
		b := &out.Messages[r.Msg].Blocks[r.Block]
		b.ReplaceResult(strings.Repeat("summary ", max(n/8, 1)))
		done[[2]int{r.Msg, r.Block}] = true
	}
	return out, done
}

// inspectLadder runs the budget ladder's deterministic steps on the
// conversation after the preset's deterministic passes and says what they
// reach. The preset's LLM passes would come first and may make it moot.
func inspectLadder(conv conversation.Conversation, p policy.Preset, b Budget) string {
	size := b.Measure(conv)
	switch {
	case !p.Budget.Enabled:
		return "budget check off"
	case size <= LadderGoal(p, b):
		return "under the goal"
	case b.Over(Floor(conv, p, b)):
		return fmt.Sprintf("cannot fit: what no step may cut is %d of limit %d", Floor(conv, p, b), b.Limit)
	}
	key := func(text string) string { return fmt.Sprintf("offload/%d", len(text)) }
	conv, off, _, err := FitOffload(conv, p, b, key)
	if err != nil {
		return "error: " + err.Error()
	}
	steps := fmt.Sprintf("offload %d", off.Count)
	if conv.Format != conversation.FormatReAct && b.Measure(conv) > LadderGoal(p, b) {
		steps += " → history summary (LLM)"
	}
	conv, cut, err := FitTruncate(conv, p, b, "archive")
	if err != nil {
		return "error: " + err.Error()
	}
	if cut.Count > 0 {
		steps += fmt.Sprintf(" → cut %d", cut.Count)
	}
	after := b.Measure(conv)
	if b.Over(after) {
		return fmt.Sprintf("%s: still %d over %d without the LLM steps", steps, after, b.Limit)
	}
	return fmt.Sprintf("%s: %d of %d", steps, after, b.Limit)
}
