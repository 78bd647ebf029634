package textcut

import (
	"testing"

	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// The benchmarks run on the 868,167-character tool result of
// psf__requests-1142 (a 16,587-line git diff); SetBytes makes the
// framework report MB/s.

func BenchmarkChunk(b *testing.B) {
	text := convtest.LargestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Chunk(text, 50_000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExtractive(b *testing.B) {
	text := convtest.LargestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		KeepLines(text, len(text)/10)
	}
}

func BenchmarkPostProcessFile(b *testing.B) {
	text := convtest.LargestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		PostProcess("read_file", text, false, nil, DefaultPostRules())
	}
}
