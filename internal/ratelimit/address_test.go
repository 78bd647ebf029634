package ratelimit

import (
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAuthFailuresPerAddress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := NewAuthFailures(3)
	a.now = func() time.Time { return now }

	for i := 0; i < 3; i++ {
		require.NoError(t, a.Check("192.0.2.1"), "failure %d is within the burst", i+1)
		a.Fail("192.0.2.1")
	}
	err := a.Check("192.0.2.1")
	var r *Refusal
	require.ErrorAs(t, err, &r, "the fourth failure in a minute is refused before any lookup")
	require.Contains(t, r.Reason, "failed authentications")
	require.Equal(t, 20, r.RetryAfterSeconds(), "one failure back every 60/3 s")
	require.NoError(t, a.Check("192.0.2.2"), "another address has its own budget")

	now = now.Add(20 * time.Second)
	require.NoError(t, a.Check("192.0.2.1"), "the bucket refills")

	off := NewAuthFailures(0)
	for i := 0; i < 100; i++ {
		off.Fail("192.0.2.1")
	}
	require.NoError(t, off.Check("192.0.2.1"), "0 is no limit")
	var none *AuthFailures
	require.NoError(t, none.Check("x"))
}

func TestAuthFailuresBoundedAddresses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := NewAuthFailures(1)
	a.now = func() time.Time { return now }
	for i := 0; i < maxAddresses; i++ {
		a.Fail("10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
	}
	require.Len(t, a.addrs, maxAddresses)
	// Full and nothing idle: a new address shares the overflow bucket.
	a.Fail("203.0.113.9")
	require.Error(t, a.Check("203.0.113.10"), "past the bound, new addresses share one bucket")
	require.LessOrEqual(t, len(a.addrs), maxAddresses+1)

	// A minute later every bucket has refilled: the idle are forgotten.
	now = now.Add(2 * time.Minute)
	a.Fail("203.0.113.11")
	require.Less(t, len(a.addrs), 10)
	require.Error(t, a.Check("203.0.113.11"))
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted, err := ParsePrefixes("10.0.0.0/8, 192.0.2.7")
	require.NoError(t, err)
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"direct", "198.51.100.4:5000", nil, "198.51.100.4"},
		{"untrusted peer's header is ignored", "198.51.100.4:5000", []string{"1.2.3.4"}, "198.51.100.4"},
		{"through a trusted proxy", "10.1.2.3:443", []string{"203.0.113.5"}, "203.0.113.5"},
		{"nearest untrusted hop wins over a forged one", "10.1.2.3:443", []string{"6.6.6.6, 203.0.113.5, 192.0.2.7"}, "203.0.113.5"},
		{"several headers", "10.1.2.3:443", []string{"6.6.6.6", "203.0.113.5"}, "203.0.113.5"},
		{"malformed hop stops the walk", "10.1.2.3:443", []string{"203.0.113.5, junk"}, "10.1.2.3"},
		{"IPv6 by its /64", "[2001:db8:1:2:3:4:5:6]:80", nil, "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6", "[::ffff:198.51.100.4]:80", nil, "198.51.100.4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			require.Equal(t, tt.want, ClientAddr(r, trusted))
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	got, err := ParsePrefixes(" 127.0.0.1 , ::1, 10.0.0.0/8,")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.0.0.0/8")}, got)
	_, err = ParsePrefixes("10.0.0.0/8,proxy.local")
	require.ErrorContains(t, err, `"proxy.local"`)
}

// TestAuthFailuresSpareAProvenKey: one client's bad keys exhaust its
// address's budget; another client behind the same address (a NAT)
// whose key authenticated before goes on; a key never proven, and one
// proven too long ago, are refused with the address.
func TestAuthFailuresSpareAProvenKey(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := NewAuthFailures(2)
	a.now = func() time.Time { return now }
	const nat = "198.51.100.7"
	require.NoError(t, a.CheckCredential(nat, "good-key-of-tenant-a"))
	a.Succeeded("good-key-of-tenant-a")
	for range 2 {
		a.Fail(nat) // another client's bad keys
	}
	var r *Refusal
	require.ErrorAs(t, a.CheckCredential(nat, "a-guess"), &r, "guesses are still limited")
	require.NoError(t, a.CheckCredential(nat, "good-key-of-tenant-a"), "a proven key is not locked out")
	now = now.Add(provenFor)
	for range 2 {
		a.Fail(nat)
	}
	require.ErrorAs(t, a.CheckCredential(nat, "good-key-of-tenant-a"), &r, "proven too long ago")
}
