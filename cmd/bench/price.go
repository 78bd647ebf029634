package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"

	"github.com/ctxcompact/orchestrator/internal/pricing"
)

// Published list prices the price per million runs is computed at. They
// are dated public figures, not an operator's contract: the note names
// each, so that anyone can redo the sum at their own rates.
const (
	// Temporal Cloud: $50 per million actions at the first volume tier.
	temporalActionUSD = 50.0 / 1e6
	// Amazon S3 Standard (us-east-1): PUT, COPY, POST and LIST requests
	// $0.005 per 1,000; GET and the others $0.0004 per 1,000; storage
	// $0.023 per GB-month.
	s3WriteUSD   = 0.005 / 1000
	s3ReadUSD    = 0.0004 / 1000
	s3GBMonthUSD = 0.023
	// Amazon RDS for PostgreSQL gp3 storage: $0.115 per GB-month.
	pgGBMonthUSD = 0.115
	// Temporal Cloud retained storage: $0.00105 per GB-hour, for the
	// namespace's retention (the note assumes 7 days).
	temporalRetainedGBHourUSD = 0.00105
	temporalRetentionHours    = 7 * 24
)

// runFigures are what one pipeline run of measurement 1 used, as
// measured there.
type runFigures struct {
	actions           float64 // Temporal billable actions (history and the session's share)
	historyBytes      float64 // the run's Temporal history, in bytes
	s3Writes, s3Reads float64 // S3 requests by price class
	objectBytes       float64 // bytes a run leaves in S3 after commit
	pgRows, pgBytes   float64 // Postgres rows and row bytes a run leaves
	tokensIn          float64 // summarizer tokens in
	tokensOut         float64 // summarizer tokens out
	model             string  // the summarizer model priced
}

// priceLine is one part of the price per million runs.
type priceLine struct {
	what    string
	once    float64 // dollars per million runs, paid when they run
	monthly float64 // dollars per month per million runs kept
}

// priceOf prices a million runs of f: what is paid when they run, and
// what keeping them costs per month (retention unset, the default, keeps
// them for good).
func priceOf(f runFigures, prices pricing.Table) []priceLine {
	const million = 1e6
	llm := 0.0
	if p, ok := prices.For(f.model); ok {
		llm = (f.tokensIn*p.Input + f.tokensOut*p.Output) // dollars per million runs: tokens per run × $ per million tokens
	}
	gb := func(bytes float64) float64 { return bytes * million / 1e9 }
	return []priceLine{
		{what: "Temporal actions", once: f.actions * million * temporalActionUSD},
		{what: "Temporal history storage (7-day retention)", once: gb(f.historyBytes) * temporalRetainedGBHourUSD * temporalRetentionHours},
		{what: "S3 requests", once: million * (f.s3Writes*s3WriteUSD + f.s3Reads*s3ReadUSD)},
		{what: "S3 storage", monthly: gb(f.objectBytes) * s3GBMonthUSD},
		{what: "Postgres storage", monthly: gb(f.pgBytes) * pgGBMonthUSD},
		{what: "summarizer tokens (" + f.model + ")", once: llm},
	}
}

// s3Classes splits the S3 requests per run by price class: writes (PUT,
// POST, and a GET of the bucket, which is a LIST) and reads.
func s3Classes(before, after map[string]int64, runs float64) (writes, reads float64) {
	for name, v := range after {
		d := float64(v - before[name])
		if d <= 0 {
			continue
		}
		method, kind, _ := strings.Cut(name, " ")
		switch {
		case method == "PUT" || method == "POST" || (method == "GET" && kind == "bucket"):
			writes += d
		default:
			reads += d
		}
	}
	return writes / runs, reads / runs
}

// keptFigures measures what the runs of the stack leave behind: bytes in
// S3 and rows and row bytes in Postgres, per final run, and the
// summarizer tokens the runs recorded.
func keptFigures(ctx context.Context, st *stack, f *runFigures) error {
	var runs float64
	err := st.store.Pool().QueryRow(ctx, `select count(*),
		coalesce(avg((stats->'cost'->>'summarizer_input_tokens')::float), 0),
		coalesce(avg((stats->'cost'->>'summarizer_output_tokens')::float), 0)
		from runs where finished_at is not null`).Scan(&runs, &f.tokensIn, &f.tokensOut)
	if err != nil {
		return fmt.Errorf("count runs: %w", err)
	}
	runs = max(runs, 1)
	var bytes int64
	p := s3.NewListObjectsV2Paginator(st.blob.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(st.blob.Bucket()), Prefix: aws.String("tenants/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for _, o := range page.Contents {
			bytes += aws.ToInt64(o.Size)
		}
	}
	f.objectBytes = float64(bytes) / runs
	rows, err := st.store.Pool().Query(ctx, `select table_name from information_schema.tables
		where table_schema = current_schema() and table_type = 'BASE TABLE' and table_name <> 'schema_version'`)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	var n, b int64
	for _, t := range tables {
		var tn, tb int64
		q := "select count(*), coalesce(sum(pg_column_size(x.*)), 0) from " + pgx.Identifier{t}.Sanitize() + " x"
		if err := st.store.Pool().QueryRow(ctx, q).Scan(&tn, &tb); err != nil {
			return fmt.Errorf("measure table %s: %w", t, err)
		}
		n, b = n+tn, b+tb
	}
	f.pgRows, f.pgBytes = float64(n)/runs, float64(b)/runs
	return nil
}

// priceRow adds the price per million runs to the report, from what
// measurement 1 counted.
func priceRow(rep *report, f runFigures, prices pricing.Table, convBytes int) {
	lines := priceOf(f, prices)
	var once, monthly float64
	var parts []string
	for _, l := range lines {
		once += l.once
		monthly += l.monthly
		switch {
		case l.monthly > 0:
			parts = append(parts, fmt.Sprintf("%s $%.2f/month", l.what, l.monthly))
		default:
			parts = append(parts, fmt.Sprintf("%s $%.2f", l.what, l.once))
		}
	}
	rep.add(row{id: "1", name: "Price per million pipeline runs (list prices, from measurement 1's counts)",
		value: fmt.Sprintf("$%.0f when they run, then $%.2f per month while kept: %s", once, monthly, strings.Join(parts, "; ")),
		compared: fmt.Sprintf("per run: %.1f actions, %.1f KB of history, %.1f S3 writes and %.1f reads, %.1f KB left in S3, %.1f Postgres rows of %.1f KB, %.0f summarizer tokens in and %.0f out",
			f.actions, f.historyBytes/1024, f.s3Writes, f.s3Reads, f.objectBytes/1024, f.pgRows, f.pgBytes/1024, f.tokensIn, f.tokensOut)})
	rep.note("1. Price per million runs: Temporal Cloud $50 per million actions (first volume tier) and $0.00105 per GB-hour of retained history for a 7-day namespace retention; "+
		"S3 Standard us-east-1 $0.005 per 1,000 PUT/POST/LIST and $0.0004 per 1,000 GET, $0.023 per GB-month; RDS gp3 $0.115 per GB-month (row bytes as pg_column_size counts them, before indexes and page overhead); "+
		"the summarizer at the built-in price table for %s. The runs are measurement 1's (a %s conversation at 100%% usage), so the summarizer's share scales with the conversations an operator compacts: "+
		"measurement 10 (real sessions at a 20,000-token limit) records 3,800–17,700 summarizer tokens per compaction, about $0.6–2.7 thousand per million runs at gpt-4o-mini, and larger limits send proportionally more; "+
		"retention unset (the default) keeps S3 objects and rows for good, so their monthly figure adds up with every million runs kept.", f.model, humanBytes(convBytes))
}
