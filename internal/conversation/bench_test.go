package conversation

import (
	"testing"
)

// BenchmarkParseRenderLargest parses and renders the largest real
// conversation (about 1 MB, one 868K-character tool result).
func BenchmarkParseRenderLargest(b *testing.B) {
	data := readData(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := Parse(data, FormatOpenAI)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Render(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseLargest and BenchmarkRenderLargest split the cost.
func BenchmarkParseLargest(b *testing.B) {
	data := readData(b, "swe-agent-gemini/psf__requests-1142.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, FormatOpenAI); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderLargest(b *testing.B) {
	data := readData(b, "swe-agent-gemini/psf__requests-1142.json")
	c, err := Parse(data, FormatOpenAI)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse150K parses a 150 KB SWE-agent conversation (OpenAI, about
// 100 messages) as a compaction run does with its input (any: detect the
// format, then parse) and with its format known.
func BenchmarkParse150K(b *testing.B) {
	data := readData(b, "swe-agent-deepseek/django__django-11742.json")
	for _, bc := range []struct {
		name  string
		parse func([]byte) (Conversation, error)
	}{
		{"any", ParseAny},
		{"openai", func(d []byte) (Conversation, error) { return Parse(d, FormatOpenAI) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
