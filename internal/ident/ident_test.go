package ident

import (
	"strings"
	"testing"

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
