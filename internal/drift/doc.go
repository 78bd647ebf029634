// Package drift says what a summary must keep of its source and must not
// invent: the drift check. Every function is pure and deterministic, and
// none calls an LLM.
//
// The pieces:
//   - Identifiers (identifiers.go) finds the facts of a text a summary must
//     not lose: its paths, URLs, ids, numbers, commands and error names;
//     Matches gives them where they occur, and Retain and Missing measure
//     which of a source's survive in a summary. The scanner behind them
//     is scan.go (one extractor per kind, overlaps resolved), kinds.go
//     (each kind's finder and filter) and commands.go (shell commands).
//   - Comparable (normalize.go) puts a source and a summary in one form
//     (escapes, heredoc markers and quoting normalised, the product's own
//     text left out) so that they compare: Required is what a summary must
//     keep of its source, MissingComparable what it left out.
//   - SessionChecks and LastErrorsCheck (drift.go) are the three-tier
//     design's checks of a session summary against its transcript (intent,
//     trajectory, premature completion, clarification) and the product's
//     own (the last errors), each a Check with its score and what the
//     summary misses; TranscriptBlocks (transcript.go) reads a transcript
//     the way they do.
//   - FabricationCheck (fabrication.go) fails a summary that quotes words
//     or names paths, URLs or ids its source never held.
//
// Cutting a text to size is package textcut's, which imports this one.
package drift
