package ratelimit

import (
	"context"
	"sync"
)

// FairSlots are n slots shared by keys (tenants) in turn: a free slot
// goes to a waiter of the key served longest ago, not to the longest
// waiter. One key with a thousand calls queued therefore delays another
// key's next call by one slot's turn, not by the thousand; a key alone
// still gets every slot (nothing is reserved).
type FairSlots struct {
	mu    sync.Mutex
	free  int
	queue map[string][]chan struct{}
	// order is the keys with waiters, the next to be served first.
	order []string
}

// NewFairSlots returns n slots (at least 1).
func NewFairSlots(n int) *FairSlots {
	return &FairSlots{free: max(n, 1), queue: map[string][]chan struct{}{}}
}

// Acquire waits for a slot for key, or for ctx to end. Call release once
// when done with the slot.
func (f *FairSlots) Acquire(ctx context.Context, key string) (release func(), err error) {
	f.mu.Lock()
	if f.free > 0 && len(f.order) == 0 {
		f.free--
		f.mu.Unlock()
		return f.releaser(), nil
	}
	ch := make(chan struct{})
	if len(f.queue[key]) == 0 {
		f.order = append(f.order, key)
	}
	f.queue[key] = append(f.queue[key], ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return f.releaser(), nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-ch:
			// Handed a slot meanwhile: give it on.
			f.handOn()
		default:
			f.remove(key, ch)
		}
		return nil, ctx.Err()
	}
}

func (f *FairSlots) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.handOn()
		})
	}
}

// handOn gives a slot being released to the next key's first waiter, or
// frees it. f.mu is held.
func (f *FairSlots) handOn() {
	if len(f.order) == 0 {
		f.free++
		return
	}
	key := f.order[0]
	f.order = f.order[1:]
	waiters := f.queue[key]
	close(waiters[0])
	if len(waiters) > 1 {
		f.queue[key] = waiters[1:]
		// Served: to the back of the line.
		f.order = append(f.order, key)
	} else {
		delete(f.queue, key)
	}
}

// remove takes a waiter that gave up out of key's queue. f.mu is held.
func (f *FairSlots) remove(key string, ch chan struct{}) {
	waiters := f.queue[key]
	for i, w := range waiters {
		if w == ch {
			waiters = append(waiters[:i:i], waiters[i+1:]...)
			break
		}
	}
	if len(waiters) > 0 {
		f.queue[key] = waiters
		return
	}
	delete(f.queue, key)
	for i, k := range f.order {
		if k == key {
			f.order = append(f.order[:i:i], f.order[i+1:]...)
			break
		}
	}
}

// Waiting is how many calls of key wait for a slot.
func (f *FairSlots) Waiting(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue[key])
}
