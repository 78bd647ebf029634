package blob_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
)

func TestValidateTenant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tenant string
		want   string // substring of the error; "" means valid
	}{
		{"acme", ""},
		{"Acme_Corp-2.eu", ""},
		{strings.Repeat("a", blob.MaxTenantLen), ""},
		{"", "empty"},
		{strings.Repeat("a", blob.MaxTenantLen+1), "at most 128"},
		{"a/b", `'/'`},
		{"..", `".."`},
		{"a..b", `".."`},
		{".", `"."`},
		{"with space", `' '`},
		{"tenant\x00", `'\x00'`},
		{"ünicode", `'ü'`},
	}
	for _, tc := range tests {
		t.Run(tc.tenant, func(t *testing.T) {
			t.Parallel()
			err := blob.ValidateTenant(tc.tenant)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestContentKey(t *testing.T) {
	t.Parallel()
	sha := blob.SHA256Hex([]byte("content"))
	tests := []struct {
		name, tenant, kind, sha, want string
	}{
		{"output", "acme", blob.KindOutput, sha, "tenants/acme/output/" + sha[:2] + "/" + sha},
		{"archive", "t-1", blob.KindArchive, sha, "tenants/t-1/archive/" + sha[:2] + "/" + sha},
		{"bad tenant", "a/b", blob.KindArchive, sha, ""},
		{"bad kind", "acme", "in/put", sha, ""},
		{"empty kind", "acme", "", sha, ""},
		{"short sha", "acme", blob.KindArchive, "ab", ""},
		{"uppercase sha", "acme", blob.KindArchive, strings.ToUpper(sha), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, blob.ContentKey(tc.tenant, tc.kind, tc.sha))
		})
	}
}

func TestTenantPrefix(t *testing.T) {
	t.Parallel()
	prefix, err := blob.TenantPrefix("acme")
	require.NoError(t, err)
	require.Equal(t, "tenants/acme/", prefix)
	key := blob.ContentKey("acme", blob.KindOutput, blob.SHA256Hex(nil))
	require.True(t, strings.HasPrefix(key, prefix))
	require.False(t, strings.HasPrefix(blob.ContentKey("acme2", blob.KindOutput, blob.SHA256Hex(nil)), prefix))

	_, err = blob.TenantPrefix("")
	require.Error(t, err)
}

func TestParseContentKeyIsStrict(t *testing.T) {
	t.Parallel()
	sha := blob.SHA256Hex([]byte("x"))
	good := blob.ContentKey("acme", blob.KindOffload, sha)
	tenant, kind, got, err := blob.ParseContentKey(good)
	require.NoError(t, err)
	require.Equal(t, []string{"acme", blob.KindOffload, sha}, []string{tenant, kind, got})
	require.NoError(t, blob.CheckOwned("acme", good))
	require.ErrorContains(t, blob.CheckOwned("other", good), "another tenant")

	for _, bad := range []string{
		"", "tenants/acme", "tenants/acme/../other/offload/" + sha[:2] + "/" + sha,
		"tenants/acme/offload/" + sha[:2] + "/" + sha + "/x",
		"tenants/acme/offload/zz/" + sha,
		"tenants/acme/offload/" + sha[:2] + "/" + sha[:63],
		"tenants/acme/Offload/" + sha[:2] + "/" + sha,
		"/tenants/acme/offload/" + sha[:2] + "/" + sha,
		"tenants/../offload/" + sha[:2] + "/" + sha,
		"buckets/acme/offload/" + sha[:2] + "/" + sha,
	} {
		_, _, _, err := blob.ParseContentKey(bad)
		require.Error(t, err, "%q", bad)
		require.Error(t, blob.CheckOwned("acme", bad), "%q", bad)
	}
}

// TestRunContentKey: a run's intermediates live under the run's prefix,
// parse as the tenant's content keys, and a run id cannot climb out of it.
func TestRunContentKey(t *testing.T) {
	t.Parallel()
	sha := blob.SHA256Hex([]byte("x"))
	key := blob.RunContentKey("acme", "run-1", blob.KindWork, sha)
	require.Equal(t, "tenants/acme/runs/run-1/work/"+sha, key)
	tenant, kind, got, err := blob.ParseContentKey(key)
	require.NoError(t, err)
	require.Equal(t, []string{"acme", blob.KindWork, sha}, []string{tenant, kind, got})
	require.NoError(t, blob.CheckOwned("acme", key))
	require.Error(t, blob.CheckOwned("other", key))
	prefix, err := blob.RunPrefix("acme", "run-1")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(key, prefix))
	require.False(t, strings.HasPrefix(blob.RunContentKey("acme", "run-10", blob.KindWork, sha), prefix), "run-1 is not run-10's prefix")

	for _, id := range []string{"", ".", "..", "a/b", "run 1", strings.Repeat("r", 129)} {
		require.Empty(t, blob.RunContentKey("acme", id, blob.KindWork, sha), "%q", id)
		_, err := blob.RunPrefix("acme", id)
		require.Error(t, err, "%q", id)
	}
	for _, bad := range []string{
		"tenants/acme/runs/../work/" + sha,
		"tenants/acme/runs/run-1/work/zz/" + sha,
		"tenants/acme/runs/run-1/work/" + sha[:2] + "/" + sha,
		"tenants/acme/runs/run-1/work/" + sha[:2],
		"tenants/acme/runs/run-1/work/" + strings.ToUpper(sha),
		"tenants/acme/runs/run-1/bad_kind/" + sha,
		"tenants/ac me/runs/run-1/work/" + sha,
	} {
		_, _, _, err := blob.ParseContentKey(bad)
		require.Error(t, err, "%q", bad)
	}
}
