package activities

import "unicode/utf8"

// Helpers for the sizes and figures the plan and commit steps record.

// runeCount is utf8.RuneCount without a copy of p: Go's counts a text
// that is not all ASCII through a string conversion of the rest, a copy
// of megabytes for a conversation.
func runeCount(p []byte) int {
	n := 0
	for len(p) > 0 {
		size := 1
		if p[0] >= utf8.RuneSelf {
			_, size = utf8.DecodeRune(p)
		}
		p = p[size:]
		n++
	}
	return n
}

func roundTo(v float64, digits int) float64 {
	f := 1.0
	for i := 0; i < digits; i++ {
		f *= 10
	}
	return float64(int64(v*f+0.5)) / f
}
