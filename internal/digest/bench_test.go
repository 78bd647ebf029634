package digest

import (
	"testing"
)

// The benchmarks run on the 868,167-character tool result of
// psf__requests-1142 (a 16,587-line git diff); SetBytes makes the
// framework report MB/s.

func BenchmarkChunk(b *testing.B) {
	text := largestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Chunk(text, 50_000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExtractive(b *testing.B) {
	text := largestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Extractive(text, len(text)/10)
	}
}

func BenchmarkIdentifiers(b *testing.B) {
	text := largestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Identifiers(text)
	}
}

func BenchmarkPostProcessFile(b *testing.B) {
	text := largestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		PostProcess("read_file", text, false, nil, DefaultPostRules())
	}
}

func BenchmarkSessionDriftChecks(b *testing.B) {
	text := largestResult(b, "swe-agent-gemini/psf__requests-1142.json")
	text = text[:150_000]
	summary := Extractive(text, 8000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		SessionDriftChecks(text, summary)
	}
}
