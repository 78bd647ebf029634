package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestParseTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		err  string
	}{
		{"", time.Time{}, ""},
		{"2026-03-01T08:30:00Z", time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC), ""},
		{"2026-03-01T08:30:00+02:00", time.Date(2026, 3, 1, 6, 30, 0, 0, time.UTC), ""},
		{"2026-03-01", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), ""},
		{"24h", now.Add(-24 * time.Hour), ""},
		{"-1h", time.Time{}, "--from \"-1h\""},
		{"yesterday", time.Time{}, "want RFC 3339"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseTime("from", tc.in, now)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.True(t, tc.want.Equal(got), "want %s, got %s", tc.want, got)
		})
	}
}

func TestRunFilterFlags(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f, err := (&runFilterFlags{session: "s1", status: "failed", from: "1h", limit: 5}).filter(now)
	require.NoError(t, err)
	require.Equal(t, store.RunFilter{Session: "s1", Status: store.RunFailed, From: now.Add(-time.Hour), Limit: 5}, f)
	_, err = (&runFilterFlags{status: "broken"}).filter(now)
	require.ErrorContains(t, err, `--status "broken"`)
	_, err = (&runFilterFlags{limit: -1}).filter(now)
	require.ErrorContains(t, err, "--limit -1")
}

func TestPrintDiffHidesKeptUnlessAll(t *testing.T) {
	t.Parallel()
	d := audit.Diff{RunID: "run-1", Kept: 1, Replaced: 1, Changes: []audit.Change{
		{Index: 0, OutIndex: 0, Role: "system", Action: audit.ActionKept, Before: 10, After: 10},
		{Index: 1, OutIndex: 1, Role: "tool", Action: audit.ActionReplaced, Before: 900, After: 90, Note: "offloaded"},
	}}
	var buf bytes.Buffer
	printDiff(&buf, d, false)
	require.Contains(t, buf.String(), "1 kept, 1 replaced")
	require.Contains(t, buf.String(), "900 → 90")
	require.NotContains(t, buf.String(), "system")
	buf.Reset()
	printDiff(&buf, d, true)
	require.Contains(t, buf.String(), "system")
}

func TestAPIKeysAreRandomAndLongEnough(t *testing.T) {
	t.Parallel()
	a, err := newAPIKeyString()
	require.NoError(t, err)
	b, err := newAPIKeyString()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.GreaterOrEqual(t, len(a), store.MinAPIKeyLength)
}

func TestAPIKeyCreateRejectsABadTenantBeforeTouchingTheDatabase(t *testing.T) {
	t.Parallel()
	// DATABASE_URL points nowhere: the tenant is refused first.
	cmd := newAPIKey()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"create", "--tenant", "bad/tenant"})
	err := cmd.Execute()
	require.ErrorContains(t, err, "--tenant")
	require.NotContains(t, out.String(), "cck_", "no key printed")
}

func TestParseExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	got, err := parseExpiry("720h", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(720*time.Hour), got)
	got, err = parseExpiry("", now)
	require.NoError(t, err)
	require.True(t, got.IsZero())
	got, err = parseExpiry("2026-04-01T00:00:00Z", now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), got)
	for _, bad := range []string{"-1h", "2026-01-01T00:00:00Z", "soon"} {
		_, err := parseExpiry(bad, now)
		require.Error(t, err, bad)
	}
}

func TestPrintableEscapesTerminalControl(t *testing.T) {
	t.Parallel()
	require.Equal(t, `red\x1b[31m text`, printable("red\x1b[31m text"))
	require.Equal(t, `a\u202eb`, printable("a\u202eb"))
	require.Equal(t, `bad \xff byte`, printable("bad \xff byte"))
	require.Equal(t, "café ok", printable("café ok"))
	require.Equal(t, `line one line two \x00`, oneLine("line one\nline two \x00"))
}
