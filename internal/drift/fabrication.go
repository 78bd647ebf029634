package drift

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// ownNotation is the structured summary's notation around what it copies
// (llm's clip, command and error lines).
var ownNotation = regexp.MustCompile(`…| → | — `)

// CheckFabrication names the fabrication check in drift verdicts.
const CheckFabrication = "fabrication"

// reQuote is a quotation in a summary: straight or curly double quotes
// around at least three words on one line.
var reQuote = regexp.MustCompile(`"([^"\n]{12,400})"|“([^”\n]{12,400})”`)

// FabricationCheck fails a summary that quotes words its source never
// held, or names a path, URL or id its source never named: a summarizer
// that invents an instruction ("the user asked: \"rewrite it in Rust\"")
// or a file would send the agent after something nobody asked for, which
// is worse than forgetting. Numbers are not checked (a summary counts and
// sums), nor are the service's own storage keys (recovery references) or
// its own text (see Comparable): summary and source are compared with
// escapes, heredoc markers and quoting normalised, so that a command
// copied from a JSON tool input is not "invented" for its backslashes.
func FabricationCheck(source, summary string) Check {
	return FabricationCheckComparable(Comparable(source), summary)
}

// FabricationCheckComparable is FabricationCheck of a source already in
// Comparable form (a caller that also needs it for Required makes it
// once).
func FabricationCheckComparable(src, summary string) Check {
	// Quotes are found in the summary as a reader sees it: an escaped
	// quotation mark copied from a tool input opens no quotation.
	plain := Unescape(summary)
	var bad []string
	checked := 0
	for _, m := range reQuote.FindAllStringSubmatch(plain, -1) {
		q := m[1]
		if q == "" {
			q = m[2]
		}
		// The summary's own notation inside a quotation (a clip's "…",
		// a command's " → " outcome, an error's " — open") is not the
		// source's: each piece between is checked on its own.
		invented := false
		for _, piece := range ownNotation.Split(q, -1) {
			key := Comparable(piece)
			if len(strings.Fields(key)) < 3 {
				continue
			}
			checked++
			invented = invented || !strings.Contains(src, key)
		}
		if invented {
			bad = append(bad, "fabricated quote: "+q)
		}
	}
	for _, id := range Identifiers(plain) {
		switch id.Kind {
		case KindPath, KindURL, KindID:
		default:
			continue
		}
		key := CompareKey(id)
		if ownKey(id.Value) || alnumRunes(key) < minKeyAlnum {
			continue
		}
		checked++
		if !strings.Contains(src, key) {
			bad = append(bad, fmt.Sprintf("fabricated %s: %s", id.Kind, id.Value))
		}
	}
	c := Check{Name: CheckFabrication, Passed: len(bad) == 0, Score: 1, Missing: bad,
		Note: fmt.Sprintf("every one of %d quotes, paths, URLs and ids is in the source", checked)}
	if len(bad) > 0 {
		c.Score = 1 - float64(len(bad))/float64(checked)
		c.Note = fmt.Sprintf("%d of %d quotes, paths, URLs and ids are not in the source", len(bad), checked)
	}
	return c
}

// ownKey reports the service's own references, which a summary gets from
// the pipeline (archive and offload keys, recovery ids) and not from the
// source.
func ownKey(v string) bool {
	if strings.Contains(v, "tenants/") {
		return true
	}
	hex := 0
	for _, r := range v {
		if unicode.Is(unicode.ASCII_Hex_Digit, r) {
			hex++
		}
	}
	return len(v) == 64 && hex == 64
}

// fold lowercases and collapses white space, so that a re-wrapped or
// re-cased quote still counts as the source's words.
func fold(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}
