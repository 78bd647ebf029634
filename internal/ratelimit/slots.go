package ratelimit

import "sync"

// Slots bounds how many holders of one key (a tenant) are in flight at
// once in this process, without waiting: a caller that finds its key's
// slots taken is told so at once and comes back later, so that it never
// holds anything else (a worker's activity slot) while it waits. Keys are
// forgotten when their last slot is released, so the map holds the keys
// in flight only.
type Slots struct {
	n    int
	mu   sync.Mutex
	held map[string]int
}

// NewSlots returns n slots per key; n < 1 is no bound (a nil *Slots is
// one too).
func NewSlots(n int) *Slots {
	if n < 1 {
		return nil
	}
	return &Slots{n: n, held: map[string]int{}}
}

// TryAcquire takes one of key's slots and returns its release (safe to
// call more than once), or ok false when all of key's slots are taken.
func (s *Slots) TryAcquire(key string) (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] >= s.n {
		return nil, false
	}
	s.held[key]++
	var once sync.Once
	return func() { once.Do(func() { s.release(key) }) }, true
}

func (s *Slots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] <= 1 {
		delete(s.held, key)
		return
	}
	s.held[key]--
}

// InFlight is how many of key's slots are taken.
func (s *Slots) InFlight(key string) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[key]
}
