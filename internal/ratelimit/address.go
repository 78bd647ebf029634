package ratelimit

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxAddresses bounds the addresses AuthFailures remembers (about 100
// bytes each). Past it, idle addresses are forgotten; when none is idle,
// new addresses share one bucket, so that a flood from many addresses is
// still limited as a whole.
const maxAddresses = 100_000

// overflow is the shared bucket's key; no address formats to it.
const overflow = "overflow"

// AuthFailures limits failed authentications per client address: each
// unknown key or session costs a database lookup and belongs to no
// tenant, so the tenant limits cannot bound it. An address may fail
// PerMinute times in a burst, then once every 60/PerMinute seconds; a
// successful authentication costs nothing.
type AuthFailures struct {
	perMinute int
	now       func() time.Time
	mu        sync.Mutex
	addrs     map[string]*rate.Limiter
	// swept is when idle addresses were last forgotten: at most once a
	// second, so that a flood of new addresses costs no scan per request.
	swept time.Time
	// proven holds the SHA-256 of credentials that authenticated within
	// provenFor, with when: a client behind the same address (a NAT, a
	// proxy) as another's bad keys is not locked out with them.
	proven map[[32]byte]time.Time
}

// provenFor is how long a credential that authenticated passes an
// address's exhausted failure limit. A guesser gains nothing from it:
// only a credential that was already valid passes, and guessing one is
// what the limit slows.
const provenFor = 15 * time.Minute

// CheckCredential is Check for a request that presents credential: one
// that authenticated within provenFor is let through even when its
// address has no failure left (Succeeded records it).
func (a *AuthFailures) CheckCredential(addr, credential string) error {
	err := a.Check(addr)
	if err == nil || a == nil {
		return err
	}
	sum := sha256.Sum256([]byte(credential))
	now := a.now()
	a.mu.Lock()
	at, ok := a.proven[sum]
	a.mu.Unlock()
	if ok && now.Sub(at) < provenFor {
		return nil
	}
	return err
}

// Succeeded records that credential authenticated (CheckCredential).
func (a *AuthFailures) Succeeded(credential string) {
	if a == nil || a.perMinute <= 0 {
		return
	}
	sum := sha256.Sum256([]byte(credential))
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proven == nil {
		a.proven = map[[32]byte]time.Time{}
	}
	if _, ok := a.proven[sum]; !ok && len(a.proven) >= maxAddresses {
		for k, at := range a.proven {
			if now.Sub(at) >= provenFor {
				delete(a.proven, k)
			}
		}
		if len(a.proven) >= maxAddresses {
			return
		}
	}
	a.proven[sum] = now
}

// NewAuthFailures allows perMinute failures per address and minute; zero
// or less is no limit.
func NewAuthFailures(perMinute int) *AuthFailures {
	return &AuthFailures{perMinute: perMinute, now: time.Now, addrs: map[string]*rate.Limiter{}}
}

// Check returns a *Refusal when addr has no failure left, before any
// lookup is made for it.
func (a *AuthFailures) Check(addr string) error {
	if a == nil || a.perMinute <= 0 {
		return nil
	}
	now := a.now()
	a.mu.Lock()
	lim := a.addrs[a.keyOf(addr, now)]
	a.mu.Unlock()
	if lim == nil {
		return nil
	}
	if tokens := lim.TokensAt(now); tokens < 1 {
		wait := time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
		return &Refusal{Reason: fmt.Sprintf("more than %d failed authentications a minute from this address", a.perMinute),
			RetryAfter: wait}
	}
	return nil
}

// Fail records a failed authentication from addr.
func (a *AuthFailures) Fail(addr string) {
	if a == nil || a.perMinute <= 0 {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	key := a.keyOf(addr, now)
	lim, ok := a.addrs[key]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(float64(a.perMinute)/60), a.perMinute)
		a.addrs[key] = lim
	}
	lim.AllowN(now, 1)
}

// keyOf is addr's bucket key: addr itself when it is remembered or there
// is room (forgetting idle addresses to make it), else the shared one.
// Call with mu held.
func (a *AuthFailures) keyOf(addr string, now time.Time) string {
	if _, ok := a.addrs[addr]; ok || len(a.addrs) < maxAddresses {
		return addr
	}
	if now.Sub(a.swept) < time.Second {
		return overflow
	}
	a.swept = now
	// An address whose bucket has refilled is as if never seen.
	for k, lim := range a.addrs {
		if k != overflow && lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(a.addrs, k)
		}
	}
	if len(a.addrs) < maxAddresses {
		return addr
	}
	return overflow
}

// ClientAddr is the address r came from, as a rate-limit key: the peer's
// IP, or, when the peer is one of the trusted proxies, the nearest
// address in X-Forwarded-For that is not. IPv6 addresses are keyed by
// their /64, which one client usually holds whole.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	ip := peerIP(r.RemoteAddr)
	if ip.IsValid() && isTrusted(ip, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a malformed hop: trust nothing further left
			}
			ip = hop.Unmap()
			if !isTrusted(ip, trusted) {
				break
			}
		}
	}
	if !ip.IsValid() {
		return r.RemoteAddr
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

func peerIP(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

func isTrusted(ip netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParsePrefixes reads a comma-separated list of CIDR prefixes or single
// addresses (TRUSTED_PROXIES).
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			ip, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", f)
			}
			out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
