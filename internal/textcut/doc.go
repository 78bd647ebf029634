// Package textcut reduces one text at the text level: it chunks, extracts,
// truncates and post-processes without any conversation model and without an
// LLM. Every function is pure and deterministic, so its output can be cached
// by content hash and replayed.
//
// Sizes are Unicode code points (runes; an invalid UTF-8 byte counts as one)
// unless a counting function is passed, as PostProcess accepts. The ReAct
// two-layer design measures in characters, and code points keep that unit
// independent of the byte encoding.
//
// The pieces:
//   - Chunk splits a text losslessly into bounded chunks for map-reduce.
//   - Extractive picks the most informative lines of a text, the offline
//     summarizer and the fallback when the LLM fails; Truncate (react-two-layer's
//     first-n-characters fallback) and Head (previews) stay selectable.
//   - Identifiers and Retain feed the drift check: which paths, URLs, ids,
//     numbers, commands and error names of a source survive in a summary.
//     The drift check compares both sides in Comparable form (escapes,
//     heredoc markers and quoting normalised, the product's own text left
//     out): Required, MissingComparable and FabricationCheck.
//   - PostProcess applies the selective tool post-processing table
//     (preset auto-summarize).
package textcut
