package gateway

import (
	"testing"

	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// bigConversation is convtest.Big, the real run laid end to end.
func bigConversation(t testing.TB, target int) []byte {
	t.Helper()
	return convtest.Big(t, target)
}

// BigConversation is bigConversation for the external tests.
var BigConversation = bigConversation
