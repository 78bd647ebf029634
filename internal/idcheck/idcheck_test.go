package idcheck

import (
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

func TestIdentifiers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, v string
		ok      bool
	}{
		{"plain", "session-1", true},
		{"unicode name", "café-1 ünïcode", true},
		{"inner space", "my session", true},
		{"empty", "", false},
		{"NUL", "a\x00b", false},
		{"newline", "a\nb", false},
		{"ESC", "a\x1b[31mred", false},
		{"DEL", "a\x7f", false},
		{"C1 control", "a\u0085b", false},
		{"bidi override", "a\u202eb", false},
		{"zero width space", "a\u200bb", false},
		{"byte order mark", "a\ufeffb", false},
		{"line separator", "a\u2028b", false},
		{"paragraph separator", "a\u2029b", false},
		{"soft hyphen (Cf)", "a\u00adb", false},
		{"tag character (Cf)", "a\U000e0041b", false},
		{"inner no-break space (Zs)", "a\u00a0b", true},
		{"invalid UTF-8", "\xff\xfe", false},
		{"dot", ".", false},
		{"dot dot", "..", false},
		{"leading space", " lead", false},
		{"trailing space", "trail ", false},
		{"trailing tab", "trail\t", false},
		{"too long", strings.Repeat("a", MaxLen+1), false},
		{"at the bound", strings.Repeat("a", MaxLen), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, f := range []func(string) error{Session, EventID, RequestID} {
				err := f(tt.v)
				if tt.ok {
					require.NoError(t, err)
				} else {
					var ie *Error
					require.ErrorAs(t, err, &ie)
					require.NotEmpty(t, ie.Field)
				}
			}
		})
	}
	require.ErrorContains(t, Session("a/b"), "'/'")
	require.NoError(t, EventID("a/b"), "event ids may hold '/'")
}

// TestWholeCategoriesRefused: every rune of Cc, Cf, Zl and Zp is refused
// inside an identifier, not a hand-picked few.
func TestWholeCategoriesRefused(t *testing.T) {
	t.Parallel()
	for _, cat := range []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp} {
		for _, rg := range cat.R16 {
			for r := rune(rg.Lo); r <= rune(rg.Hi); r += rune(rg.Stride) {
				require.Error(t, Session("a"+string(r)+"b"), "%U", r)
			}
		}
		for _, rg := range cat.R32 {
			for r := rune(rg.Lo); r <= rune(rg.Hi); r += rune(rg.Stride) {
				require.Error(t, Session("a"+string(r)+"b"), "%U", r)
			}
		}
	}
}
