package strategy

import (
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// The tests' short forms of the planners the product calls with options.

// PlanOffload is PlanOffloadWith with a minimum size and a protection mask.
func PlanOffload(c conversation.Conversation, count tokens.Counter, minTokens int, protected []bool) []OffloadCandidate {
	return PlanOffloadWith(c, count, OffloadOptions{MinTokens: minTokens, Protected: protected})
}

// FindCheckpoint is FindCheckpointAnchored without the re-anchoring flag.
func FindCheckpoint(c conversation.Conversation, toolNames []string, watermark string) (id string, found bool) {
	id, found, _ = FindCheckpointAnchored(c, toolNames, watermark)
	return id, found
}

// PruneAtWatermark is PruneAtWatermarkWith without options.
func PruneAtWatermark(c conversation.Conversation, watermark string) (conversation.Conversation, WatermarkStats, error) {
	return PruneAtWatermarkWith(c, watermark, WatermarkOptions{})
}

// DefaultPinMarkers are the presets' pin markers, the one list
// (policy.DefaultPinMarkers).
var DefaultPinMarkers = policy.DefaultPinMarkers()
