package strategy

import (
	"slices"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Protection says which messages no strategy may change (the
// auto-summarize "never summarize" list, the offload-compact kept tail).
type Protection struct {
	// System protects every system message (system prompt, persona).
	System bool
	// FirstUser protects the first user message holding text: the task
	// statement, which the three-tier session summary calls the session intent.
	FirstUser bool
	// LastN protects the last N messages (immediate context).
	LastN int
	// PinMarkers pins every user message whose text contains one of these
	// substrings (case-sensitive), e.g. "[pinned]" or "IMPORTANT:". Text
	// inside tool results never pins: only what the user wrote does.
	PinMarkers []string
	// CheckpointTools protects the latest call of one of these tools and
	// its result: the session's active state checkpoint.
	CheckpointTools []string
	// Frozen protects messages[:Frozen]: everything up to the end of the
	// session log (plan.LogView), which stays byte-identical between
	// compactions so that the agent's prompt cache still hits.
	Frozen int
}

// Protected returns, per message index, whether the message is protected.
// Protection is closed over tool pairing: a protected message holding a
// tool result also protects the message with its tool_use, and a protected
// tool_use protects its results, so no strategy can orphan either half.
func Protected(c conversation.Conversation, p Protection) []bool {
	n := len(c.Messages)
	mask := make([]bool, n)
	firstUserSeen := false
	for i, m := range c.Messages {
		switch m.Role {
		case conversation.RoleSystem:
			if p.System {
				mask[i] = true
			}
		case conversation.RoleUser:
			text := textOf(m, false)
			if p.FirstUser && !firstUserSeen && hasTextBlock(m) {
				mask[i] = true
				firstUserSeen = true
			}
			for _, marker := range p.PinMarkers {
				if marker != "" && strings.Contains(text, marker) {
					mask[i] = true
					break
				}
			}
		}
	}
	if i := latestCall(c, p.CheckpointTools); i >= 0 {
		mask[i] = true // its result is protected with it, by closePairs
	}
	for i := max(0, n-p.LastN); i < n; i++ {
		mask[i] = true
	}
	for i := 0; i < min(p.Frozen, n); i++ {
		mask[i] = true
	}
	return closePairs(c, indexTools(c), mask)
}

// latestCall is the index of the last message calling one of tools, -1
// when none does.
func latestCall(c conversation.Conversation, tools []string) int {
	if len(tools) == 0 {
		return -1
	}
	for i := len(c.Messages) - 1; i >= 0; i-- {
		for _, b := range c.Messages[i].Blocks {
			if b.Kind == conversation.KindToolUse && slices.Contains(tools, b.ToolName) {
				return i
			}
		}
	}
	return -1
}

// hasTextBlock reports whether a message carries a text block, which tells
// a user's own message from an Anthropic message of bare tool results.
func hasTextBlock(m conversation.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind == conversation.KindText {
			return true
		}
	}
	return false
}
