package textcut

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PostProcess on file contents: numbered listings and files summarized.

// reNumbered matches the line-number prefix of cat -n and editor views.
var reNumbered = regexp.MustCompile(`^\s*\d+(?:\t|: |\| |  )`)

// fileSummary keeps the head, the definition lines and the tail of a long
// file read, with numbered markers for what it leaves out.
func fileSummary(text string, fileLike bool, r PostRules) (string, bool) {
	if !fileLike {
		return "", false
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) <= r.FileLines || len(lines) <= fileHeadLines+fileTailLines {
		return "", false
	}
	keep := make([]bool, len(lines))
	for i := 0; i < fileHeadLines; i++ {
		keep[i] = true
	}
	for i := len(lines) - fileTailLines; i < len(lines); i++ {
		keep[i] = true
	}
	defs, totalDefs := 0, 0
	for i := fileHeadLines; i < len(lines)-fileTailLines; i++ {
		content := reNumbered.ReplaceAllString(lines[i], "")
		if !reDefinition.MatchString(content) {
			continue
		}
		totalDefs++
		if defs < fileMaxDefs {
			keep[i] = true
			defs++
		}
	}
	var b strings.Builder
	defNote := fmt.Sprintf("%d definition lines", defs)
	if totalDefs > defs {
		defNote = fmt.Sprintf("%d of %d definition lines", defs, totalDefs)
	}
	fmt.Fprintf(&b, "[file: %d lines, %d chars; kept lines 1–%d, %s and the last %d lines; request a line range for more]\n",
		len(lines), utf8.RuneCountInString(text), fileHeadLines, defNote, fileTailLines)
	for i := 0; i < len(lines); {
		if keep[i] {
			b.WriteString(lines[i])
			b.WriteByte('\n')
			i++
			continue
		}
		j := i
		for j < len(lines) && !keep[j] {
			j++
		}
		if j-i == 1 {
			fmt.Fprintf(&b, "[… line %d omitted …]\n", i+1)
		} else {
			fmt.Fprintf(&b, "[… lines %d–%d omitted …]\n", i+1, j)
		}
		i = j
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// numberedListing reports whether the first 50 non-blank lines start with
// consecutive line numbers (cat -n, editor views). Requiring the very first
// line to be numbered keeps a TSV with a header and an id column out.
func numberedListing(lines []string) bool {
	n, numbered, prev := 0, 0, -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n++
		m := reNumbered.FindString(l)
		if m == "" {
			if n == 1 {
				return false
			}
			continue
		}
		num, err := strconv.Atoi(strings.TrimSpace(strings.TrimRight(m, "\t:| ")))
		if err == nil && (prev < 0 || num == prev+1) {
			numbered++
		}
		if err == nil {
			prev = num
		}
		if n == 50 {
			break
		}
	}
	return n > 0 && numbered*10 >= n*9
}
