// Package memtest measures what code allocates, for the tests that bound
// it as a multiple of its input. What a step allocates is also the most it
// can hold at once, so such a bound needs no timing-dependent sample of
// the heap. Tests that use it must not run in parallel: the counters are
// the whole process's.
package memtest

import "runtime"

// Allocated runs fn and returns the bytes it allocated.
func Allocated(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
