// Package offline is the offline summarizer: it summarizes a conversation
// without a model, so a deployment without OPENAI_BASE_URL works, and a
// run whose model is down or whose summary fails its drift checks still
// gets a summary.
//
// It needs no LLM because it reads structure rather than meaning: who said
// what, which tool call ran which command (a small shell reader finds the
// files a command read, wrote or deleted), what came back, which errors a
// later run resolved. From that it writes a fixed digest (the task, the
// constraints, the files touched, the commands and their outcomes, the
// errors, the decisions, the current state, the next step) under the
// headings the model's prompt asks for, copying every fact verbatim, and
// trims it to the request's budget in a fixed order. The same transcript
// always gives the same summary, byte for byte.
//
// The pieces:
//   - Summarizer implements llm.Summarizer for every prompt (summarizer.go).
//   - structured.go reads a transcript into events and the digest.
//   - shell.go finds the files and the kind of a shell command.
//   - layout.go renders the digest under a prompt's headings within a budget.
//
// Text that is not a conversation (a tool result, a chunk) goes to
// textcut.KeepLines, which works on one text at the line level.
package offline
