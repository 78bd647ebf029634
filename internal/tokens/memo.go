package tokens

import "sync"

// memoMinBytes: shorter texts are counted again rather than remembered,
// since hashing them costs about as much as counting them.
const memoMinBytes = 64

// Memo wraps a counter and remembers the count of every text of at least
// 64 bytes. A compaction measures the same conversation after each pass,
// and most of its messages do not change between passes, so counting each
// text once removes most of the counting work. A Memo holds its texts (by
// reference) until it is dropped: make one per unit of work, not one per
// process.
type Memo struct {
	Counter
	mu   sync.Mutex
	seen map[string]int
}

// NewMemo wraps c.
func NewMemo(c Counter) *Memo {
	return &Memo{Counter: c, seen: make(map[string]int)}
}

// Count returns the size of s, counting it only the first time.
func (m *Memo) Count(s string) int {
	if len(s) < memoMinBytes {
		return m.Counter.Count(s)
	}
	m.mu.Lock()
	n, ok := m.seen[s]
	m.mu.Unlock()
	if ok {
		return n
	}
	n = m.Counter.Count(s)
	m.mu.Lock()
	m.seen[s] = n
	m.mu.Unlock()
	return n
}
