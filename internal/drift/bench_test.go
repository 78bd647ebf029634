package drift_test

import (
	"testing"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// The benchmarks run on the 868,167-character tool result of
// psf__requests-1142 (a 16,587-line git diff); SetBytes makes the
// framework report MB/s.

func BenchmarkIdentifiers(b *testing.B) {
	text := convtest.LargestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		drift.Identifiers(text)
	}
}

// BenchmarkSessionDriftChecks checks a summary against a transcript as
// plan.Transcript writes it: the first 150,000 characters of the diff as
// one tool result of several thousand lines, after a request and a call.
func BenchmarkSessionDriftChecks(b *testing.B) {
	result := convtest.LargestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	result = result[:150_000]
	text := "[user]\nFix the failing tests in requests.\n\n[assistant tool call bash]\ngit diff HEAD~1\n\n[tool tool result bash]\n" + result + "\n\n"
	summary := textcut.KeepLines(result, 8000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		drift.SessionChecks(text, summary)
	}
}
