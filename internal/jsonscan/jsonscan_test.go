package jsonscan

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		at   int
		end  int // ValueEnd(doc, at)
	}{
		{"string", `"abc", 1`, 0, 5},
		{"escaped quote", `"a\"b"]`, 0, 6},
		{"escaped backslash before the quote", `"a\\" ,`, 0, 5},
		{"three backslashes", `"a\\\"b"}`, 0, 8},
		{"object with strings holding brackets", `{"a":"}]","b":[1,{"c":"{"}]} x`, 0, 28},
		{"array", `[1, [2, 3], "]"],`, 0, 16},
		{"number", `-12.5e3,`, 0, 7},
		{"literal before a brace", `true}`, 0, 4},
		{"null at the end", `null`, 0, 4},
		{"value inside", `{"k": "v"}`, 6, 9},
		{"unterminated string", `"abc`, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.end, ValueEnd([]byte(tt.doc), tt.at))
		})
	}
	require.Equal(t, 4, SkipSpace([]byte(" \t\r\nx"), 0))
	require.Equal(t, 2, SkipSpace([]byte("  "), 0))
	require.Equal(t, 2, SkipSpace([]byte("x y"), 1))
}
