package main

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// heapPeak is the largest heap of a window of runs, in the two ways the
// bench can see it.
type heapPeak struct {
	// inuse is the process's largest HeapInuse, sampled every 50 ms:
	// everyone's live data and the garbage the collector has not yet
	// reclaimed (up to GOGC% of the live heap of the last collection).
	inuse uint64
	// live is the process's largest heap marked live by a collection.
	live uint64
	// worker and api are the splits of the live heap, by allocation site,
	// at the collection where the worker's (and the gateway's) part was
	// largest; zero splits when no collection was profiled.
	worker, api heapSplit
	// profiled counts the collections whose live heap was split.
	profiled int
}

// peakTracker follows the heap of a window of runs: HeapInuse every
// 50 ms, and the live heap of every collection. A collection whose live
// heap is within 10% of the largest so far is split by owner with the
// heap profile, which the runtime publishes one collection late (as of
// the mark termination before the latest one: runtime/mprof.go), so the
// split is taken once the next collection has ended.
type peakTracker struct {
	stop chan struct{}
	done chan heapPeak
}

func startPeakTracker(every time.Duration) *peakTracker {
	t := &peakTracker{stop: make(chan struct{}), done: make(chan heapPeak, 1)}
	go t.loop(every)
	return t
}

func (t *peakTracker) loop(every time.Duration) {
	var (
		p       heapPeak
		ms      runtime.MemStats
		sample  = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		lastGC  uint32
		pending bool // the collection lastGC is worth a split
	)
	runtime.ReadMemStats(&ms)
	lastGC = ms.NumGC
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		runtime.ReadMemStats(&ms)
		p.inuse = max(p.inuse, ms.HeapInuse)
		if ms.NumGC != lastGC {
			// The profile now shows the collection before the latest:
			// lastGC when exactly one more has ended since.
			if pending && ms.NumGC == lastGC+1 {
				if h, err := splitHeap(ms.HeapInuse); err == nil {
					p.profiled++
					if h.worker > p.worker.worker {
						p.worker = h
					}
					if h.api > p.api.api {
						p.api = h
					}
				}
			}
			metrics.Read(sample)
			live := sample[0].Value.Uint64()
			p.live = max(p.live, live)
			pending = live*10 >= p.live*9
			lastGC = ms.NumGC
		}
		select {
		case <-t.stop:
			t.done <- p
			return
		case <-tick.C:
		}
	}
}

// peak stops the tracker and returns what it saw.
func (t *peakTracker) peak() heapPeak {
	close(t.stop)
	return <-t.done
}
