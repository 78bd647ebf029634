// Package compress holds the pure, deterministic conversation-level
// strategies of the orchestrator: protection rules, watermark pruning
// (seed 001), offload planning and references (seeds 002 and 004), tool-input
// truncation (seed 004 tier 2), split points and history compaction assembly
// (seeds 002–004), tool-result replacement (seed 000), selective tool
// post-processing (seed 003) and context status levels (seed 004).
//
// Every strategy takes a conversation.Conversation and returns a new one
// built from a Clone, so the input is never changed. Nothing here does I/O,
// calls an LLM or reads the clock: whatever is time-like or stored elsewhere
// is passed in, which keeps the strategies safe to run inside Temporal
// activities that may be retried.
package compress

import "errors"

// ErrUnsupportedFormat is returned (wrapped) when a strategy would break the
// shape of a wire format, for example history compaction of a ReAct
// trajectory, whose turns seed 000 forbids dropping. Planners can test for it
// with errors.Is and skip the strategy.
var ErrUnsupportedFormat = errors.New("strategy not supported for this format")
