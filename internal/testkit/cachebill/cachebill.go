// Package cachebill prices an agent's requests as a provider with a
// prompt cache prices input, in bytes (a stand-in for tokens): the start a
// request shares with the one before is read from the cache at 0.1× the
// input price, the rest is written to it at 1.25×. The proxy's e2e test
// and bench 12 compare what goes upstream through the proxy with the
// host's own requests sent whole.
package cachebill

// Read and Write are the prices of a cached byte read and of a byte
// written to the cache, relative to an uncached input byte.
const (
	Read  = 0.1
	Write = 1.25
)

// Price is cur's price after prev: the bytes of cur's start that prev
// shares at Read, the rest at Write.
func Price(prev, cur []byte) float64 {
	n := Shared(prev, cur)
	return Read*float64(n) + Write*float64(len(cur)-n)
}

// Shared is how many bytes a and b share as their start: what a cache
// keyed by prefix reads of b after a.
func Shared(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Bill adds up a session's requests two ways: as they went upstream
// through the proxy, and as the host sent them.
type Bill struct {
	Proxied, Whole         float64
	prevProxied, prevWhole []byte
}

// Add prices one turn: what went upstream, and what the host sent.
func (b *Bill) Add(proxied, whole []byte) {
	b.Proxied += Price(b.prevProxied, proxied)
	b.Whole += Price(b.prevWhole, whole)
	b.prevProxied, b.prevWhole = proxied, whole
}

// Ratio is the proxied bill over the whole one.
func (b *Bill) Ratio() float64 {
	if b.Whole == 0 {
		return 0
	}
	return b.Proxied / b.Whole
}
