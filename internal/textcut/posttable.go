package textcut

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// PostProcess on tables: JSON rows, pipe tables and delimited text.

var rowContainers = []string{"rows", "records", "data", "items", "results", "hits", "entries"}

// jsonTable samples an array of objects longer than r.DBRows, at the top
// level or in a rows-like field of the top-level object.
func jsonTable(s string, r PostRules) (string, bool) {
	raw := []byte(s)
	where := ""
	if firstByte(raw) == '{' {
		fields, err := objectFields(raw)
		if err != nil {
			return "", false
		}
		raw = nil
		for _, want := range rowContainers {
			for _, f := range fields {
				if f.Key == want && firstByte(f.Raw) == '[' {
					raw, where = f.Raw, f.Key
					break
				}
			}
			if raw != nil {
				break
			}
		}
		if raw == nil {
			return "", false
		}
	}
	elems, err := arrayElems(raw)
	if err != nil || len(elems) <= r.DBRows {
		return "", false
	}
	var columns []string
	seen := map[string]bool{}
	objects := 0
	for _, e := range elems {
		fields, err := objectFields(e)
		if err != nil {
			continue
		}
		objects++
		for _, f := range fields {
			if !seen[f.Key] {
				seen[f.Key] = true
				columns = append(columns, f.Key)
			}
		}
	}
	if objects*10 < len(elems)*9 {
		return "", false
	}
	var b strings.Builder
	in := ""
	if where != "" {
		in = fmt.Sprintf(" in %q", where)
	}
	sample := min(max(r.SampleRows, 0), len(elems))
	fmt.Fprintf(&b, "[table: %d rows%s; columns: %s; first %d rows]\n", len(elems), in, strings.Join(columns, ", "), sample)
	for _, e := range elems[:sample] {
		var c bytes.Buffer
		if err := json.Compact(&c, e); err != nil {
			return "", false
		}
		b.Write(c.Bytes())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[… %d more rows omitted …]", len(elems)-sample)
	return b.String(), true
}

var reBorder = regexp.MustCompile(`^\s*[|+]?(?:[-=:]{3,}[|+]?)+\s*$|^\s*[|+](?:[-=:]+[|+])+\s*$`)

// pipeTable samples psql, MySQL and markdown tables: data lines hold '|',
// border lines only '-', '+', '=', ':' and '|'.
func pipeTable(text string, r PostRules) (string, bool) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) <= r.DBRows {
		return "", false
	}
	isData := func(l string) bool { return strings.Contains(l, "|") && !reBorder.MatchString(l) }
	// The header ends at the first border line that follows a data line.
	headerEnd := -1
	sawData := false
	for i, l := range lines {
		if i > 5 {
			break
		}
		if reBorder.MatchString(l) && sawData {
			headerEnd = i
			break
		}
		if isData(l) {
			sawData = true
		} else if !reBorder.MatchString(l) && strings.TrimSpace(l) != "" {
			return "", false
		}
	}
	if headerEnd < 0 {
		return "", false
	}
	var rows []int
	for i := headerEnd + 1; i < len(lines); i++ {
		if isData(lines[i]) {
			rows = append(rows, i)
		}
	}
	lastRow := headerEnd
	if len(rows) > 0 {
		lastRow = rows[len(rows)-1]
	}
	// Lines after the header are rows, borders and a short trailer.
	if len(rows) <= r.DBRows || len(rows)*10 < (lastRow-headerEnd)*9 {
		return "", false
	}
	header := lines[headerEnd-1]
	var columns []string
	for _, c := range strings.Split(header, "|") {
		if c = strings.TrimSpace(c); c != "" {
			columns = append(columns, c)
		}
	}
	sample := min(max(r.SampleRows, 0), len(rows))
	var b strings.Builder
	fmt.Fprintf(&b, "[table: %d rows; columns: %s; first %d rows]\n", len(rows), strings.Join(columns, ", "), sample)
	for _, l := range lines[:headerEnd+1] {
		b.WriteString(l + "\n")
	}
	for _, i := range rows[:sample] {
		b.WriteString(lines[i] + "\n")
	}
	fmt.Fprintf(&b, "[… %d more rows omitted …]", len(rows)-sample)
	for _, l := range lines[lastRow+1:] {
		b.WriteString("\n" + l)
	}
	return b.String(), true
}

// delimitedTable samples CSV and TSV: the first lines must agree on a field
// count of at least 2 for one delimiter.
func delimitedTable(text string, r PostRules) (string, bool) {
	head := Head(text, 20)
	var delim rune
	for _, d := range []rune{'\t', ',', ';', '|'} {
		if consistentFields(head, d) {
			delim = d
			break
		}
	}
	if delim == 0 {
		return "", false
	}
	rd := csv.NewReader(strings.NewReader(text))
	rd.Comma = delim
	rd.FieldsPerRecord = -1
	rd.LazyQuotes = true
	rd.ReuseRecord = true
	var columns []string
	records := 0
	cut := 0 // byte offset after the header and the sample rows
	sample := max(r.SampleRows, 0)
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", false
		}
		if records == 0 {
			columns = append([]string(nil), rec...)
		}
		records++
		if records <= sample+1 {
			cut = int(rd.InputOffset())
		}
	}
	rows := records - 1
	if rows <= r.DBRows {
		return "", false
	}
	kept := min(sample, rows)
	var b strings.Builder
	fmt.Fprintf(&b, "[table: %d rows; columns: %s; first %d rows]\n", rows, strings.Join(columns, ", "), kept)
	b.WriteString(strings.TrimRight(text[:cut], "\r\n"))
	fmt.Fprintf(&b, "\n[… %d more rows omitted …]", rows-kept)
	return b.String(), true
}

func consistentFields(head string, delim rune) bool {
	rd := csv.NewReader(strings.NewReader(head))
	rd.Comma = delim
	rd.FieldsPerRecord = -1
	rd.LazyQuotes = true
	want, n, agree := -1, 0, 0
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The head may end inside a quoted field; judge what was read.
			break
		}
		n++
		if want < 0 {
			want = len(rec)
		}
		if len(rec) == want {
			agree++
		}
	}
	return want >= 2 && n >= 3 && agree*10 >= n*9
}
