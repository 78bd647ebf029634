package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// benchEngine measures the throughput of the deterministic passes and of
// token counting on the 1 MB conversation, in this process, and reads
// their share of a run's CPU from the profile of the 1 MB load (4).
func benchEngine(ctx context.Context, st *stack, o options, rep *report) error {
	conv, err := sizedChat(o.dataDir, profiledSize)
	if err != nil {
		return err
	}
	parsed, err := conversation.ParseAny(conv)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	mb := float64(len(conv)) / (1 << 20)

	// Token counting of the whole conversation, cold: the encoding's
	// shared counter, without the per-activity memo that plan.NewBudget
	// puts in front of it (which would count each text once).
	counter, err := tokens.New(tokens.EncodingForModel(agentModel))
	if err != nil {
		return err
	}
	var tokTime time.Duration
	tokN := 0
	for tokTime < o.engineTime {
		t0 := time.Now()
		tokens.Conversation(counter, parsed)
		tokTime += time.Since(t0)
		tokN++
	}

	// The deterministic passes of the default preset (every pass on), at a
	// limit equal to the conversation's size, as the Deterministic activity
	// runs them on a conversation it has not seen: a fresh parse (outside
	// the timer) and a fresh budget (and so a fresh memo of token counts)
	// each time.
	ad, err := policy.Resolve(policy.Adaptive, nil)
	if err != nil {
		return err
	}
	limit, err := contextLimit(policy.Adaptive, conv, 1.0)
	if err != nil {
		return err
	}
	var detTime time.Duration
	detN := 0
	var applied []string
	for detTime < o.engineTime {
		c, err := conversation.ParseAny(conv)
		if err != nil {
			return err
		}
		t0 := time.Now()
		// Cold: a fresh memo over the bare counter, not plan.NewBudget's
		// process-wide cache (tokens.Shared), which would answer every
		// count after the first loop.
		ab := plan.Budget{Counter: tokens.NewMemo(counter), Limit: limit, Overhead: ad.FixedOverhead}
		out, err := plan.Deterministic(plan.Input{Conv: c, Preset: ad, Budget: ab, OffloadKey: func(text string) string {
			return blob.ContentKey(tenant, blob.KindOffload, blob.SHA256Hex([]byte(text)))
		}})
		detTime += time.Since(t0)
		if err != nil {
			return fmt.Errorf("deterministic passes: %w", err)
		}
		if detN == 0 {
			for _, ps := range out.Passes {
				if ps.Applied {
					applied = append(applied, ps.Name)
				}
			}
		}
		detN++
	}
	tokRate := mb * float64(tokN) / tokTime.Seconds()
	detRate := mb * float64(detN) / detTime.Seconds()
	rep.add(row{id: "6", name: fmt.Sprintf("Engine: token counting (o200k, cold) of a %s conversation", humanBytes(len(conv))),
		value: fmt.Sprintf("%.1f MB/s (%s per pass)", tokRate, ms(tokTime/time.Duration(tokN)))})
	rep.add(row{id: "6", name: "Engine: deterministic passes (adaptive preset, every pass on)",
		value:    fmt.Sprintf("%.1f MB/s (%s per run of the passes)", detRate, ms(detTime/time.Duration(detN))),
		compared: fmt.Sprintf("token counting %.1f MB/s", tokRate), ratio: fmt.Sprintf("%.2f", detRate/tokRate)})

	if c := rep.cpu; c != nil && c.runs > 0 {
		tok, det := c.share(catTokens), c.share(catDeterministic)
		perRun := c.runCPU() / time.Duration(c.runs)
		rep.add(row{id: "6", name: "Engine share of a run's CPU (1 MB load of 4.)",
			value:    fmt.Sprintf("token counting %.1f%%, deterministic passes %.1f%%: %.1f%% together", 100*tok, 100*det, 100*(tok+det)),
			compared: fmt.Sprintf("all CPU of the runs: %s per run", ms(perRun))})
		var parts []string
		for _, k := range sortedCats(c.byCat) {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", k, 100*c.byCat[k]))
		}
		pg := "Postgres backends not readable (not counted)"
		if c.pgKnown {
			pg = fmt.Sprintf("Postgres backends %s", ms(c.pgCPU))
		}
		s3 := "S3 server in-process (in the profile)"
		if st.s3PID != 0 {
			s3 = fmt.Sprintf("versitygw %s", ms(c.s3CPU))
		}
		rep.note("6. Engine: throughput measured in this process on the %s conversation (MB = 2^20 bytes; deterministic passes applied: %s). "+
			"The share comes from a CPU profile of the whole %s load of 4. (%d runs in %s): the runs' CPU is the bench process (%s) without "+
			"the fake LLM, the bench harness and the in-process S3 server, plus %s and %s. Token counting is any sample with `internal/tokens` or the "+
			"tokenizer on its stack; deterministic passes are samples under `plan.Deterministic` without token counting. The bench "+
			"process's profile by component: %s.",
			humanBytes(len(conv)), strings.Join(applied, ", "), humanBytes(profiledSize), c.runs, c.window.Round(time.Second),
			ms(c.processCPU), s3, pg, strings.Join(parts, ", "))
	} else {
		rep.note("6. Engine: the CPU share needs the profiled 1 MB load of 4., which did not run.")
	}
	return nil
}
