package conversation

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Seeds for the decoding fuzz tests: escapes of every kind, surrogate pairs
// and lone halves, invalid UTF-8, whitespace, repeated keys, nesting and
// quotes and brackets inside strings.
var jsonSeeds = []string{
	`"plain"`,
	`""`,
	` "spaced" `,
	`"esc \" \\ \/ \b \f \n \r \t end"`,
	`"\u00e9\u20AC\ud83d\ude00"`,
	`"lone \ud800 high, \udc00 low, \ud800\u0041 unpaired, \ud800\ud800\udc00 twice"`,
	`"\u0000 nul"`,
	"\"bad \xff utf8\"",
	"\"cut \xe2\x82\"",
	`"bad \x escape"`,
	`"\'"`,
	"\"raw\ttab\"",
	`"unterminated`,
	`"a"b"`,
	`"\u12"`,
	`{"a":1,"b":"x","a":2}`,
	`{ "k\u0065y" : [1, {"x": "}]\"["}, "\\"] , "n" : -1.5e3 , "t":true,"f":false,"z":null }`,
	`[]`,
	` [ 1 , "two" , {"three":3} , [4] , null , true ] `,
	`[{"role":"user","content":"x"},{"role":"tool"}]`,
	`[{"a":1}, 2]`,
	"{\"k\xff\":1}",
	`{}`,
}

// FuzzDecodeString checks decodeString against json.Unmarshal on any
// input: the fast unquoting must give exactly what encoding/json gives.
func FuzzDecodeString(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := decodeString(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if jsonKind(raw) != jsonString {
			require.False(t, ok)
			return
		}
		require.Equal(t, err == nil, ok, "ok for %q (json: %v)", raw, err)
		if ok {
			require.Equal(t, want, got, "decoding %q", raw)
		}
	})
}

// FuzzSplit checks the split functions against json.Unmarshal on valid
// JSON, the only input they take.
func FuzzSplit(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		obj, ok := splitObject(raw)
		want, wantOK := decodeObject(raw)
		require.Equal(t, wantOK, ok, "object %q", raw)
		require.Equal(t, want, obj, "object %q", raw)

		arr, ok := splitArray(raw)
		wantArr, wantOK := decodeArray(raw)
		require.Equal(t, wantOK, ok, "array %q", raw)
		require.Equal(t, wantArr, arr, "array %q", raw)
		if !ok {
			return
		}
		objs, bad, kind := splitObjects(raw)
		wantObjs, wantBad, wantKind, err := decodeObjectsReference(raw)
		require.NoError(t, err)
		require.Equal(t, wantBad, bad, "objects %q", raw)
		require.Equal(t, wantKind, kind, "objects %q", raw)
		require.Equal(t, wantObjs, objs, "objects %q", raw)
	})
}

// decodeObjectsReference is what the parsers used before splitObjects.
func decodeObjectsReference(raw []byte) ([]map[string]json.RawMessage, int, string, error) {
	items, ok := decodeArray(raw)
	if !ok {
		return nil, -1, "", nil
	}
	for i, it := range items {
		if k := jsonKind(it); k != jsonObject {
			return nil, i, k, nil
		}
	}
	var objs []map[string]json.RawMessage
	err := json.Unmarshal(raw, &objs)
	return objs, -1, "", err
}

// TestDetectFoldedKeys pins down how detection reads content and type: as
// encoding/json fills a struct field, ignoring case, the last match winning.
func TestDetectFoldedKeys(t *testing.T) {
	t.Parallel()
	cases := []struct {
		doc  string
		want Format
	}{
		{`[{"role":"user","Content":[{"type":"tool_use"}]}]`, FormatAnthropic},
		{`[{"role":"user","content":[{"TYPE":"thinking"}]}]`, FormatAnthropic},
		{`[{"role":"user","Content":[{"type":"tool_use"}],"content":"x"}]`, FormatOpenAI},
		{`[{"role":"user","content":"x","Content":[{"type":"tool_use"}]}]`, FormatAnthropic},
		{`[{"role":"user","content":[{"type":"thinking","Type":"text"}]}]`, FormatOpenAI},
		{`[{"role":"user","content":[{"Type":"text","type":"thinking"}]}]`, FormatAnthropic},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result"}]}]}`, FormatAnthropic},
	}
	for _, tc := range cases {
		got, err := Detect([]byte(tc.doc))
		require.NoError(t, err, tc.doc)
		require.Equal(t, tc.want, got, tc.doc)
	}
}
