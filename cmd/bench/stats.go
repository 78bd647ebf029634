package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"time"
)

// percentile returns the p-th percentile (0..100) of ds by the
// nearest-rank method; 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// percentileF is percentile for plain numbers.
func percentileF(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// loopResult is the outcome of a closed loop.
type loopResult struct {
	window    time.Duration
	done      float64 // successful runs inside the window, by the share of each run's time spent in it
	overlap   int     // successful runs that overlap the window
	total     int     // successful runs, warm-up and drain included
	failed    int
	firstErr  error
	latencies []time.Duration // of the successful runs that overlap the window
	elapsed   time.Duration
}

// rate is successful runs per second in the window. A run counts by the
// share of its duration that falls inside the window, so that runs longer
// than the window still give a steady-state rate.
func (r loopResult) rate() float64 {
	if r.window <= 0 {
		return 0
	}
	return r.done / r.window.Seconds()
}

// closedLoop runs fn from workers goroutines, each starting its next run
// when the previous one ends. The measurement window opens after warmup;
// after it closes no run starts, and the ones in flight are waited for.
func closedLoop(ctx context.Context, workers int, warmup, window time.Duration, fn func(ctx context.Context, w, i int) error) loopResult {
	res := loopResult{window: window}
	var mu sync.Mutex
	var wg sync.WaitGroup
	begin := time.Now()
	open := begin.Add(warmup)
	deadline := open.Add(window)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				t0 := time.Now()
				err := fn(ctx, w, i)
				t1 := time.Now()
				mu.Lock()
				if err != nil {
					res.failed++
					if res.firstErr == nil {
						res.firstErr = err
					}
				} else {
					res.total++
					if in := overlap(t0, t1, open, deadline); in > 0 {
						res.done += float64(in) / float64(max(t1.Sub(t0), 1))
						res.overlap++
						res.latencies = append(res.latencies, t1.Sub(t0))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(begin)
	if verbose {
		fmt.Fprintf(os.Stderr, "bench:   loop of %d: %.1f runs in the %s window (%d overlapping it), %d in all, %d failed, took %s, p50 %s\n",
			workers, res.done, window, res.overlap, res.total, res.failed, res.elapsed.Round(time.Millisecond), ms(percentile(res.latencies, 50)))
	}
	return res
}

// eachOnce runs fn once per worker, all at once, and returns the first
// error.
func eachOnce(ctx context.Context, workers int, fn func(ctx context.Context, w, i int) error) error {
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = fn(ctx, w, -1)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// overlap is how much of [a0, a1] falls inside [b0, b1].
func overlap(a0, a1, b0, b1 time.Time) time.Duration {
	lo, hi := a0, a1
	if b0.After(lo) {
		lo = b0
	}
	if b1.Before(hi) {
		hi = b1
	}
	if hi.Before(lo) {
		return 0
	}
	return hi.Sub(lo)
}

// verbose prints progress details to stderr (-v).
var verbose bool

// ms prints a duration in milliseconds, or seconds above 10 s.
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// signedMS prints a difference of durations with its sign.
func signedMS(d time.Duration) string {
	if d < 0 {
		return "−" + ms(-d)
	}
	return "+" + ms(d)
}

// forEach runs fn(0..n-1) on at most width goroutines at a time and
// waits for all of them.
func forEach(n, width int, fn func(i int)) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(width, 1))
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			fn(i)
		}()
	}
	wg.Wait()
}

// windowProfiles is the folder the ceiling's window profiles go to
// (-window-profiles); empty writes none.
var windowProfiles string
