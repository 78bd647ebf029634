package drift

import "strings"

// TranscriptBlock is one "[header]" block of a transcript as
// plan.Transcript writes it.
type TranscriptBlock struct {
	// Head is the header without its brackets: "user", "assistant",
	// "system", "assistant tool call NAME", "tool tool result NAME" or
	// "tool tool error NAME".
	Head string
	// Text is the block's text without leading and trailing blank space.
	Text string
}

// TranscriptBlocks splits a transcript as plan.Transcript writes it
// ("[header]\ntext\n\n" per block) into its blocks, in order. Text before
// the first header is dropped, and a bracketed line that is not one of the
// headers above stays part of its block's text. It shares the header
// grammar with the drift checks, so both read a transcript the same way.
func TranscriptBlocks(transcript string) []TranscriptBlock {
	blocks := parseTranscriptBlocks(transcript)
	out := make([]TranscriptBlock, len(blocks))
	for i, b := range blocks {
		out[i] = TranscriptBlock{Head: strings.TrimSpace(b.head), Text: b.text}
	}
	return out
}
