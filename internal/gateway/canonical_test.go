package gateway

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/memtest"
)

// oldSum is what requestHash hashed before canonicalSum: the canonical
// form written out whole.
func oldSum(t *testing.T, data []byte) ([sha256.Size]byte, error) {
	t.Helper()
	canon, err := canonicalJSON(data)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(canon), nil
}

// TestCanonicalSumIsTheCanonicalFormsHash: for every real conversation of
// the repository and for documents made to hit every rule (repeated and
// escaped keys, escapes of every kind, lone surrogates, HTML characters,
// U+2028, numbers as written, white space, deep nesting, more than one
// value, invalid JSON), canonicalSum is sha256 of canonicalJSON's bytes,
// or the same error: a retry of an event stored before it must keep its
// run.
func TestCanonicalSumIsTheCanonicalFormsHash(t *testing.T) {
	t.Parallel()
	var docs [][]byte
	for _, dir := range []string{"../../testdata/conversations", "../conversation/testdata"} {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
				return err
			}
			data, err := os.ReadFile(path)
			if err == nil {
				docs = append(docs, data)
			}
			return err
		}))
	}
	require.Greater(t, len(docs), 20, "the repository's conversations")
	for _, s := range []string{
		``, ` `, `null`, ` true `, `false`, `0`, `-0.0`, `1e400`, `12345678901234567890.5E-3`, `"x"`, `[]`, `{}`, `[ ]`, `{ }`,
		`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1,"b":0,"a":{"z":1,"y":[1,2]}}`, `{"\u0061":1,"a":2}`, `{"a\u0000b":1,"a":0}`,
		`{"é":1,"e":2,"E":3,"\u00e9":4}`, `"<a href=\"x\">&amp;</a>"`, `"\u2028\u2029"`, "\"\u2028\"", `"\ud800"`, `"\ud800\udc00"`,
		`"\udc00\ud800"`, `"\b\f\n\r\t\/\\\""`, `"\u0001\u001f\u007f"`, `["\ud83d\ude00", "😀"]`, `{"k":"v"} {"x":1}`, `[1,2] x`,
		"\"a\x7fb<>&\"", "\"\xff\xfe\"", "[\"\xe2\x80\xa8\", \"ok\xc3\"]", "{\"\xff\":1,\"\xfe\":2}",
		`{"a":}`, `{"a" 1}`, `[1,]`, `"abc`, `nul`, "{\n\t\"messages\" : [ {\"role\":\"user\" , \"content\":\"hi\"} ]\r\n}",
		strings.Repeat(`[`, 1200) + strings.Repeat(`]`, 1200), strings.Repeat(`{"a":`, 11000) + `1` + strings.Repeat(`}`, 11000),
	} {
		docs = append(docs, []byte(s))
	}
	r := rand.New(rand.NewSource(7))
	for range 3000 {
		v := randomJSON(r, 0)
		data, err := json.Marshal(v)
		require.NoError(t, err)
		docs = append(docs, data, []byte(reformat(r, string(data))))
	}
	for _, d := range docs {
		want, werr := oldSum(t, d)
		got, gerr := canonicalSum(d)
		if werr != nil {
			require.Error(t, gerr, "%.200q", d)
			require.Equal(t, werr.Error(), gerr.Error())
			continue
		}
		require.NoError(t, gerr, "%.200q", d)
		require.Equal(t, want, got, "%.200q", d)
	}
}

// randomJSON makes a value with the keys, strings and numbers the
// canonical form must get right.
func randomJSON(r *rand.Rand, depth int) any {
	strs := []string{"", "a", "A", "b", "é", "<&>", "\u2028", "\x01", "\"quoted\"", `back\slash`, "tab\tnew\nline", "😀", "日本", "\ufffd"}
	switch k := r.Intn(7); {
	case k == 0 && depth < 5:
		m := map[string]any{}
		for n := r.Intn(5); n > 0; n-- {
			m[strs[r.Intn(len(strs))]] = randomJSON(r, depth+1)
		}
		return m
	case k == 1 && depth < 5:
		var a []any
		for n := r.Intn(5); n > 0; n-- {
			a = append(a, randomJSON(r, depth+1))
		}
		return a
	case k == 2:
		return json.Number([]string{"0", "-1", "1.50", "1e3", "-2.5E-7", "123456789012345678901234567890"}[r.Intn(6)])
	case k == 3:
		return r.Intn(2) == 0
	case k == 4:
		return nil
	default:
		var sb strings.Builder
		for n := r.Intn(4); n >= 0; n-- {
			sb.WriteString(strs[r.Intn(len(strs))])
		}
		return sb.String()
	}
}

// reformat spreads white space between the tokens of a compact document
// and writes some characters of its strings as \u escapes, and repeats a
// key now and then, as another client's encoder might.
func reformat(r *rand.Rand, s string) string {
	var sb strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in && c == '\\':
			sb.WriteByte(c)
			i++
			sb.WriteByte(s[i])
			continue
		case in && c == '"':
			in = false
		case in && c < 0x80 && r.Intn(8) == 0:
			fmt.Fprintf(&sb, `\u%04x`, c)
			continue
		case !in && c == '"':
			in = true
		case !in && (c == ',' || c == ':' || c == '[' || c == '{'):
			sb.WriteByte(c)
			sb.WriteString([]string{"", " ", "\n\t", "\r\n  "}[r.Intn(4)])
			continue
		case !in && c == '}' && r.Intn(4) == 0 && i > 1 && s[i-1] != '{':
			sb.WriteString(`,"a":null`)
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// TestCanonicalSumAllocatesLittle: hashing a conversation of 5 MB
// allocates next to nothing (each string goes from the document to the
// hash as it is read), where decoding it into a tree and encoding that
// again allocated 9.1× the conversation and held the tree and the whole
// canonical form at once.
func TestCanonicalSumAllocatesLittle(t *testing.T) {
	data := bigConversation(t, 5<<20)
	want, err := oldSum(t, data)
	require.NoError(t, err)
	var got [sha256.Size]byte
	alloc := memtest.Allocated(func() { got, err = canonicalSum(data) })
	require.NoError(t, err)
	require.Equal(t, want, got)
	t.Logf("canonicalSum of %d bytes allocated %.1f MB", len(data), float64(alloc)/(1<<20))
	require.Less(t, alloc, uint64(len(data))/10, "allocated %d for %d bytes", alloc, len(data))
}
