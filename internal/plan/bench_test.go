package plan

import (
	"os"
	"testing"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// BenchmarkDeterministic runs every deterministic pass of the three-tier
// preset on the 1 MB psf__requests-1142 conversation, with the per-budget
// count memo (as the activities do) and without it.
func BenchmarkDeterministic(b *testing.B) {
	// The real conversations are part of the repository (see
	// testdata/conversations/README.md); a missing file fails.
	path := "../../testdata/conversations/swe-agent-gemini/psf__requests-1142.json"
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("test data %s: %v", path, err)
	}
	conv, err := conversation.ParseAny(data)
	if err != nil {
		b.Fatal(err)
	}
	p, err := policy.Resolve(policy.ThreeTier, []byte(`{"offload":{"min_tokens":2000}}`))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := tokens.New(tokens.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		counter func() tokens.Counter
	}{
		{"memo", func() tokens.Counter { return tokens.NewMemo(raw) }},
		{"plain", func() tokens.Counter { return raw }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				budget := Budget{Counter: tc.counter(), Limit: 100000}
				if _, err := Deterministic(Input{Conv: conv, Preset: p, Budget: budget, OffloadKey: key}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
