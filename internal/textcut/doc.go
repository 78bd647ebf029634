// Package textcut cuts one text to size at the text level: it chunks,
// keeps the most informative lines, truncates and post-processes, without
// any conversation model and without an LLM. Every function is pure and
// deterministic, so its output can be cached by content hash and replayed.
//
// Sizes are Unicode code points (runes; an invalid UTF-8 byte counts as one)
// unless a counting function is passed, as PostProcess accepts. The ReAct
// two-layer design measures in characters, and code points keep that unit
// independent of the byte encoding.
//
// The pieces:
//   - Chunk splits a text losslessly into bounded chunks for map-reduce
//     (chunk.go).
//   - KeepLines picks the most informative lines of a text, the offline
//     summarizer's cut of a text that is no conversation and the fallback
//     when the LLM fails; Truncate (react-two-layer's first-n-characters
//     fallback) and Head (previews) stay selectable (extractive.go).
//     KeepLines scores lines by the identifiers the drift check asks a
//     summary to keep (drift.Matches), the package's one import of the
//     product.
//   - PostProcess applies the selective tool post-processing table
//     (preset auto-summarize; postprocess.go, and a file per reduced
//     form: postjson.go, postsearch.go, posttable.go, postfile.go).
//
// What a summary must keep of its source, and must not invent, is package
// drift's.
package textcut
