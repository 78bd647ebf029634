package digest

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

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
// sums), nor are the service's own storage keys (recovery references).
func FabricationCheck(source, summary string) DriftCheck {
	src := foldSource(source)
	var bad []string
	checked := 0
	for _, m := range reQuote.FindAllStringSubmatch(summary, -1) {
		q := m[1]
		if q == "" {
			q = m[2]
		}
		if len(strings.Fields(q)) < 3 {
			continue
		}
		checked++
		if !strings.Contains(src, fold(q)) {
			bad = append(bad, "fabricated quote: "+q)
		}
	}
	for _, id := range Identifiers(summary) {
		switch id.Kind {
		case KindPath, KindURL, KindID:
		default:
			continue
		}
		if ownKey(id.Value) {
			continue
		}
		checked++
		if !strings.Contains(src, fold(id.Value)) {
			bad = append(bad, fmt.Sprintf("fabricated %s: %s", id.Kind, id.Value))
		}
	}
	c := DriftCheck{Name: CheckFabrication, Passed: len(bad) == 0, Score: 1, Missing: bad,
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

// sourceEscapes are the JSON escapes of tool inputs that foldSource
// undoes.
var sourceEscapes = strings.NewReplacer(`\"`, `"`, `\n`, "\n", `\t`, "\t", `\\`, `\`)

// foldSource is the source as fold sees it, with JSON escapes of tool
// inputs undone, so that a command quoted from a call's arguments is
// found: fold(sourceEscapes.Replace(s)), in one pass and one copy. A
// drift check's source is a whole transcript (megabytes), and the steps
// one after another held several copies of it and a string header for
// every word, about ten times the source at once.
func foldSource(s string) string {
	if !utf8.ValidString(s) {
		// strings.ToLower writes U+FFFD for an invalid byte of a
		// non-ASCII text: the steps one after another decide.
		return fold(sourceEscapes.Replace(s))
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false // a run of white space waits for the next word
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		switch {
		case r == '\\' && i+1 < len(s):
			// The replacer's pairs, left to right without overlap.
			switch s[i+1] {
			case '"', '\\':
				r, size = rune(s[i+1]), 2
			case 'n':
				r, size = '\n', 2
			case 't':
				r, size = '\t', 2
			}
		case r >= utf8.RuneSelf:
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		if unicode.IsSpace(r) {
			space = space || b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// fold lowercases and collapses white space, so that a re-wrapped or
// re-cased quote still counts as the source's words.
func fold(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}
