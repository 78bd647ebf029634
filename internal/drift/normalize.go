package drift

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The drift checks compare a summary with its source after normalising
// both the same way. A transcript holds tool inputs as JSON (a command's
// quotes are \" and its lines \n, twice over when the input was itself
// JSON), while a summary copies them as it found them or as an agent
// reads them; a heredoc command is a marker line and a script. Compared
// raw, a command copied verbatim is "invented" for a backslash, and an
// identifier kept unescaped is "missing". The product's own text in a
// source (the reference blocks, pointer lines and figures the passes
// write, the recovery ids) is not something a summary must keep, and in a
// summary (the repair's and the patch's headings) not something it
// invented.

// Unescape undoes JSON and shell backslash escapes (\" \' \\ \/ \n \t \r
// and a backslash before a line break) in one pass: a run of backslashes
// before one of those characters is the character (a command in a tool
// input that was itself serialised holds \\n, a line break twice
// escaped), a run before anything else one backslash. A text without a
// backslash is returned as it is, without a copy.
func Unescape(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		j := i
		for j < len(s) && s[j] == '\\' {
			j++
		}
		if j == len(s) {
			b.WriteByte('\\')
			break
		}
		switch n := s[j]; n {
		case '"', '\'', '/':
			b.WriteByte(n)
		case 'n', 'r':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '\n':
			// A shell line continuation: the two lines are one command.
			b.WriteByte(' ')
		default:
			b.WriteByte('\\')
			i = j - 1
			continue
		}
		i = j
	}
	return b.String()
}

var (
	// reOwn is the text the product writes into a conversation or a
	// summary itself (strategy's reference blocks, recoverid's pointer
	// lines, the session log's labels, textcut's omission markers, the
	// structured summary's notes, the repair's and the patch's headings)
	// and its recovery ids and offload ids. What it names from the source
	// (a path, a first line) stays. A heredoc's marker (<< 'EOF', <<EOF,
	// <<-"EOF") goes with them.
	reOwn = regexp.MustCompile(`(?m)` +
		`<<-?\s*(?:'\w+'|"\w+"|\w+)|` + // heredoc markers
		`\b[0-9a-f]{64}(?:\.m\d+(?:-\d+|b\d+))?\b` + // recovery and offload ids
		`|\btenants/\S+` + // storage keys
		`|\*\*(?:Original Size|Tokens Saved|Status|Preview|Path|Summary):\*\*(?: \d+ tokens\b| \d+\b| Content persisted to disk)?` +
		`|\(\d+ lines?, \d+ chars of input\)` +
		`|^#+ (?:Tool Call|Offloaded|Omitted Items)\b.*$` +
		`|\[?\*?Recover the (?:full content|original result|summarized messages? [\d–-]+) with the recover_context tool, id:\s*(?:[0-9a-f]{64}(?:\.m\d+(?:-\d+|b\d+))?)?\*?\]?` +
		`|Tool result is at:` +
		`|</?session-log(?: block="[\d-]+")?>` +
		`|\[… (?:lines? )?[\d–-]+ (?:more )?(?:lines?|chars|rows) omitted …\]` +
		`|^Identifiers kept by the drift check:$` +
		`|^[-|] \((?:\d+ (?:more|earlier) [a-z ]+?s?)(?::[^)]*)?\)(?: \| \| \|)?$` +
		`|~\d+ tokens\b`)
)

// StripOwn removes heredoc markers and the product's own text (see reOwn)
// from an unescaped text.
func StripOwn(s string) string {
	return reOwn.ReplaceAllString(s, " ")
}

// Comparable is s as the drift checks compare it: unescaped, without
// heredoc markers, the product's own text or quoting characters (the same
// text is quoted one way in a command and another in prose), lowercased,
// white space collapsed. Summary and source both go through it. A source
// is a whole transcript (megabytes): it is made in two copies (the
// unescaped text, then the result, the product's text skipped as the
// result is written), once per check.
func Comparable(s string) string {
	u := Unescape(s)
	own := reOwn.FindAllStringIndex(u, -1)
	var b strings.Builder
	b.Grow(len(u))
	space := false // a run of white space (or a piece left out) waits for the next word
	for i := 0; i < len(u); {
		if len(own) > 0 && i >= own[0][0] {
			i = max(i, own[0][1])
			own = own[1:]
			space = space || b.Len() > 0
			continue
		}
		r, size := utf8.DecodeRuneInString(u[i:])
		i += size
		switch {
		case r == '"' || r == '\'' || r == '`' || r == '“' || r == '”' || r == '‘' || r == '’':
			continue
		case unicode.IsSpace(r):
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

// CompareKey is the form of an identifier a summary must hold (in
// Comparable form): a command's first line (a summary lists what ran, not
// the script a heredoc fed it), any other identifier whole.
func CompareKey(id Identifier) string {
	v := Unescape(id.Value)
	if id.Kind == KindCommand {
		v, _, _ = strings.Cut(strings.TrimSpace(v), "\n")
	}
	return Comparable(v)
}

// minKeyAlnum is how many letters or digits an identifier's key needs to
// be one: "f:\n" read from a JSON-escaped "with open(p) as f:\n" is
// "f:" unescaped, not a path.
const minKeyAlnum = 3

// Required are the identifiers of ids a summary of a source must keep:
// not the product's own (found only in its text: "879 tokens" of a
// reference block, a recovery id), nor fragments that normalising shows
// are not one. src is the Comparable form of the source ids were found in.
func Required(ids []Identifier, src string) []Identifier {
	out := make([]Identifier, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		key := CompareKey(id)
		if seen[key] || alnumRunes(key) < minKeyAlnum || !strings.Contains(src, key) {
			continue
		}
		seen[key] = true
		out = append(out, id)
	}
	return out
}

// MissingComparable returns the identifiers of ids that a summary, in
// Comparable form, does not hold, in their order. An identifier present
// raw counts too (a path with its :line suffix kept as is).
func MissingComparable(ids []Identifier, summary string) []Identifier {
	sum := Comparable(summary)
	var missing []Identifier
	for _, id := range ids {
		if present(id, summary) || strings.Contains(sum, CompareKey(id)) {
			continue
		}
		missing = append(missing, id)
	}
	return missing
}

func alnumRunes(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			n++
		}
	}
	return n
}
