package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/pricing"
)

// TestPriceOf: the price per million runs is each count times its list
// price, with storage apart as a monthly figure.
func TestPriceOf(t *testing.T) {
	t.Parallel()
	f := runFigures{actions: 9, historyBytes: 20_000, s3Writes: 10, s3Reads: 1, objectBytes: 100_000,
		pgRows: 16, pgBytes: 6_000, tokensIn: 10_000, tokensOut: 1_000, model: "gpt-4o-mini"}
	got := map[string]priceLine{}
	for _, l := range priceOf(f, pricing.Defaults()) {
		got[l.what] = l
	}
	require.InDelta(t, 450, got["Temporal actions"].once, 1e-9, "9 actions × $50 per million")
	require.InDelta(t, 10*5+1*0.4, got["S3 requests"].once, 1e-9)
	require.InDelta(t, 100*0.023, got["S3 storage"].monthly, 1e-9, "100 GB for a million runs")
	require.InDelta(t, 6*0.115, got["Postgres storage"].monthly, 1e-9)
	require.InDelta(t, 20*0.00105*168, got["Temporal history storage (7-day retention)"].once, 1e-9)
	require.InDelta(t, 10_000*0.15+1_000*0.60, got["summarizer tokens (gpt-4o-mini)"].once, 1e-9)

	unknown := f
	unknown.model = "no-such-model"
	for _, l := range priceOf(unknown, pricing.Defaults()) {
		if l.what == "summarizer tokens (no-such-model)" {
			require.Zero(t, l.once, "an unpriced model costs nothing it can name")
		}
	}
}

// TestS3Classes: PUT, POST and a bucket GET (a LIST) are writes; other
// GETs are reads; counts before the window are left out.
func TestS3Classes(t *testing.T) {
	t.Parallel()
	before := map[string]int64{"PUT archive": 5}
	after := map[string]int64{"PUT archive": 15, "POST bucket": 10, "GET bucket": 10, "GET archive": 2, "PUT runs": 60}
	w, r := s3Classes(before, after, 10)
	require.InDelta(t, 9.0, w, 1e-9)
	require.InDelta(t, 0.2, r, 1e-9)
}
