package tokens

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// benchFile is the largest real conversation: 147 messages, 990,154 bytes
// of content, one 868,167-character tool result (a diff).
const benchFile = "swe-agent-gemini/psf__requests-1142.json"

// BenchmarkCountText counts the content strings of benchFile; MB/s is over
// their bytes.
func BenchmarkCountText(b *testing.B) {
	contents := readContents(b, benchFile)
	total := 0
	for _, s := range contents {
		total += len(s)
	}
	for _, name := range Encodings() {
		c := mustNew(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, s := range contents {
					c.Count(s)
				}
			}
		})
	}
}

// BenchmarkConversation counts benchFile parsed into the canonical model, as
// the plan activity does; MB/s is over the file's bytes.
func BenchmarkConversation(b *testing.B) {
	raw := convtest.Read(b, benchFile)
	conv, err := conversation.ParseAny(raw)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range Encodings() {
		c := mustNew(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				Conversation(c, conv)
			}
		})
	}
}

// BenchmarkPathological counts 1 MB inputs that defeat regex splitting or
// the byte-pair merge: one huge piece, whitespace-only text, blank lines
// with indentation (quadratic in the library alone), random base64.
func BenchmarkPathological(b *testing.B) {
	const size = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var sb strings.Builder
	for range size {
		sb.WriteByte(b64[rng.IntN(len(b64))])
	}
	inputs := []struct{ name, text string }{
		{"x", strings.Repeat("x", size)},
		{"spaces", strings.Repeat(" ", size) + "x"},
		{"newlines", strings.Repeat("\n", size)},
		{"blank-lines", strings.Repeat(" \n", size/2)},
		{"indented-blank-lines", strings.Repeat("    \n", size/5)},
		{"base64", sb.String()},
	}
	for _, name := range []string{O200kBase, Cl100kBase} {
		c := mustNew(b, name)
		for _, in := range inputs {
			b.Run(name+"/"+in.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				for b.Loop() {
					c.Count(in.text)
				}
			})
		}
	}
}
