// Package strategy holds the pure, deterministic conversation-level
// strategies of the orchestrator: protection rules, the watermark prune
// (preset watermark), offload planning and references (offload-compact, and
// the three-tier tier 1), tool-input truncation (three-tier tier 2), split
// points and history compaction assembly (offload-compact, auto-summarize,
// three-tier), tool-result replacement (react-two-layer), selective tool
// post-processing (auto-summarize) and context status levels (three-tier).
// docs/designs.md describes each design and its numbers.
//
// Every strategy takes a conversation.Conversation and returns a new one
// built from a Clone, so the input is never changed. Nothing here does I/O,
// calls an LLM or reads the clock: whatever is time-like or stored elsewhere
// is passed in, which keeps the strategies safe to run inside Temporal
// activities that may be retried.
package strategy

import "errors"

// ErrUnsupportedFormat is returned (wrapped) when a strategy would break the
// shape of a wire format, for example history compaction of a ReAct
// trajectory, whose turns the ReAct two-layer design forbids dropping.
// Planners can test for it with errors.Is and skip the strategy.
var ErrUnsupportedFormat = errors.New("strategy not supported for this format")
