package offline

import "strings"

// openErrorsTail bounds how much of a transcript OpenErrors reads: its
// last errors and what resolved them are near its end, and the drift
// check reads megabyte transcripts.
const openErrorsTail = 256 << 10

// OpenErrors are the errors of a transcript (as plan.Transcript writes
// it) that a summary of it must keep: of its last verbatimErrors distinct
// error lines, as the offline summary finds them, those that no later
// command of the same kind resolved, oldest first, each clipped as the
// offline summary writes it. Only the transcript's last openErrorsTail
// bytes are read, from a block's start. The drift check requires them of
// a history summary by a model (drift.LastErrorsCheck). Nil for a text
// that is not a transcript.
func OpenErrors(transcript string) []string {
	if len(transcript) > openErrorsTail {
		tail := transcript[len(transcript)-openErrorsTail:]
		i := strings.Index(tail, "\n\n[")
		if i < 0 {
			return nil
		}
		transcript = tail[i+2:]
	}
	events, ok := parseEvents(transcript)
	if !ok {
		return nil
	}
	d := buildDigest(events)
	var out []string
	for _, e := range d.errors[max(len(d.errors)-verbatimErrors, 0):] {
		if !e.resolved {
			out = append(out, clip(e.line, maxErrorRunes))
		}
	}
	return out
}
