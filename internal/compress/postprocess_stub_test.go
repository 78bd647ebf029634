package compress

import (
	"testing"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func propPostProcess(t *testing.T, in conversation.Conversation, mask []bool) {}
