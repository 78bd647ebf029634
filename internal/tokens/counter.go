// Package tokens counts tokens offline (o200k_base, cl100k_base) or
// characters (the ReAct two-layer design measures in characters).
package tokens

// Counter counts the size of a text in one unit (tokens of an encoding, or
// characters).
type Counter interface {
	// Count returns the size of s.
	Count(s string) int
	// Name is the encoding name: "o200k_base", "cl100k_base" or "chars",
	// followed by the safety factor for a scaled counter, as in
	// "o200k_base×1.25 (claude)" (see Scale).
	Name() string
}
