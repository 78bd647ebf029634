package strategy

import (
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// WatermarkStats reports what watermark pruning did.
type WatermarkStats struct {
	// Found is false when the watermark is empty or no assistant message
	// holds it; the conversation is then returned unchanged (the watermark
	// design logs a warning and forwards the request as is).
	Found bool
	// BlocksRemoved counts dropped tool_use and tool_result blocks (the
	// figure the watermark design logs).
	BlocksRemoved int
	// MessagesRemoved counts messages dropped because pruning left them
	// empty.
	MessagesRemoved int
	// Boundary is the input index of the first message left unchanged:
	// the watermark's message, or earlier with KeepBefore or when a kept
	// result answers an earlier call.
	Boundary int
}

// WatermarkOptions tunes PruneAtWatermarkWith.
type WatermarkOptions struct {
	// KeepBefore keeps this many messages before the watermark's message
	// unchanged (the watermark design's "keep N messages before watermark" item).
	KeepBefore int
	// Protected messages before the boundary are kept verbatim (nil:
	// none). The mask is closed over tool pairing before use.
	Protected []bool
}

// FindCheckpointAnchored returns the id of the newest tool_use, in an assistant
// message, whose name is one of toolNames and which comes after the message
// holding the current watermark. A name also matches its MCP-qualified form
// ("mcp__server__name"), since the watermark design's checkpoint tool is
// "mcp__nisaba__deactivate_augments".
//
// The watermark design takes the first call after the current one; we take the newest,
// so that several checkpoint calls since the last event advance the
// watermark to the latest at once instead of one per event. The search
// starts after the watermark's message, not inside it: rescanning it would
// find the old watermark again. When the current watermark is no longer in
// the conversation (a history summary replaced its message, or the agent
// dropped it), every call still present is newer than it: the search
// re-anchors on the whole conversation instead of getting stuck. found is
// false when there is no newer call; reanchored reports the re-anchoring.
func FindCheckpointAnchored(c conversation.Conversation, toolNames []string, watermark string) (id string, found, reanchored bool) {
	start := 0
	if watermark != "" {
		start = -1
		for i, m := range c.Messages {
			if m.Role == conversation.RoleAssistant && holdsToolUse(m, watermark) {
				start = i + 1
			}
		}
		if start < 0 {
			start, reanchored = 0, true
		}
	}
	for i := len(c.Messages) - 1; i >= start; i-- {
		m := c.Messages[i]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		for j := len(m.Blocks) - 1; j >= 0; j-- {
			b := m.Blocks[j]
			if b.Kind == conversation.KindToolUse && matchesToolName(b.ToolName, toolNames) && b.ToolID != watermark {
				return b.ToolID, true, reanchored
			}
		}
	}
	return "", false, reanchored
}

// PruneAtWatermarkWith applies the watermark prune's block-level filtering: before the
// assistant message holding the watermark tool_use, every tool_use and
// tool_result block is dropped (for OpenAI this removes the role "tool"
// messages and the tool calls of assistant messages), text is kept, and
// messages left empty are dropped; the watermark's message and everything
// after it are unchanged. An empty or absent watermark leaves the
// conversation unchanged with Found false. The boundary moves earlier
// when a kept tool result answers a call before it, so pruning never
// orphans a result. ReAct trajectories are refused: the ReAct two-layer
// design never drops a turn or touches an action.
func PruneAtWatermarkWith(c conversation.Conversation, watermark string, opts WatermarkOptions) (conversation.Conversation, WatermarkStats, error) {
	if c.Format == conversation.FormatReAct {
		return conversation.Conversation{}, WatermarkStats{}, fmt.Errorf("watermark pruning of a %s conversation: %w", c.Format, ErrUnsupportedFormat)
	}
	if err := checkMask(c, opts.Protected); err != nil {
		return conversation.Conversation{}, WatermarkStats{}, fmt.Errorf("watermark pruning: %w", err)
	}
	if opts.KeepBefore < 0 {
		return conversation.Conversation{}, WatermarkStats{}, fmt.Errorf("watermark pruning: KeepBefore is %d, want >= 0", opts.KeepBefore)
	}
	out := c.Clone()
	if watermark == "" {
		return out, WatermarkStats{}, nil
	}
	wm := -1
	for i, m := range c.Messages {
		if m.Role == conversation.RoleAssistant && holdsToolUse(m, watermark) {
			wm = i
			break
		}
	}
	if wm < 0 {
		return out, WatermarkStats{}, nil
	}

	idx := indexTools(c)
	boundary := pairSafeBoundary(c, idx, max(0, wm-opts.KeepBefore))
	stats := WatermarkStats{Found: true, Boundary: boundary}
	mask := closePairs(c, idx, opts.Protected)

	kept := make([]conversation.Message, 0, len(out.Messages))
	for i, m := range out.Messages {
		if i >= boundary || mask[i] || m.Role == conversation.RoleSystem {
			kept = append(kept, m)
			continue
		}
		blocks := make([]conversation.Block, 0, len(m.Blocks))
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindToolUse || b.Kind == conversation.KindToolResult {
				stats.BlocksRemoved++
				continue
			}
			blocks = append(blocks, b)
		}
		if len(blocks) == len(m.Blocks) {
			kept = append(kept, m)
			continue
		}
		if isEmpty(blocks) {
			stats.MessagesRemoved++
			continue
		}
		m.Blocks = blocks
		kept = append(kept, m)
	}
	out.Messages = kept
	return out, stats, nil
}

// pairSafeBoundary moves a boundary earlier until no message at or after
// it holds one half of a tool call whose other half is before it.
func pairSafeBoundary(c conversation.Conversation, idx toolIndex, boundary int) int {
	for i := len(c.Messages) - 1; i >= boundary; i-- {
		for _, j := range idx.partners(i) {
			// Moving the boundary to j brings messages j..boundary-1 into
			// the kept range; the loop goes on down to the new boundary,
			// so their partners are checked too.
			boundary = min(boundary, j)
		}
	}
	return boundary
}

// holdsToolUse reports whether a message holds the tool_use with this id.
func holdsToolUse(m conversation.Message, id string) bool {
	for _, b := range m.Blocks {
		if b.Kind == conversation.KindToolUse && b.ToolID == id {
			return true
		}
	}
	return false
}

// matchesToolName reports whether name is one of names, directly or in
// its MCP-qualified form "mcp__<server>__<name>".
func matchesToolName(name string, names []string) bool {
	for _, n := range names {
		if n == "" {
			continue
		}
		if name == n || (strings.HasPrefix(name, "mcp__") && strings.HasSuffix(name, "__"+n)) {
			return true
		}
	}
	return false
}

// isEmpty reports whether blocks carry nothing: no blocks, or only text
// blocks of white space (an OpenAI assistant message whose content was ""
// next to its tool calls).
func isEmpty(blocks []conversation.Block) bool {
	for _, b := range blocks {
		if b.Kind != conversation.KindText || strings.TrimSpace(b.Text) != "" {
			return false
		}
	}
	return true
}
