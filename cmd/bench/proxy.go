package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/cachebill"
)

// proxyLimit is measurement 12's context limit: the slowly
// growing OpenAI session "compacted at 65% of a 20,000-token limit".
const proxyLimit = 20_000

// proxyFiles are measurement 12's sessions: real SWE-agent trajectories
// in OpenAI chat format.
var proxyFiles = []string{
	"swe-agent-deepseek/django__django-11742.json",
	"swe-agent-deepseek/django__django-12308.json",
	"swe-agent-deepseek/django__django-11564.json",
	"swe-agent-deepseek/django__django-13265.json",
}

// playedModel answers each chat completion with the assistant message the
// recorded trajectory has next, as the agent's model did.
type playedModel struct {
	mu   sync.Mutex
	next json.RawMessage
	// last is the body of the last request the model got.
	last []byte
}

func (m *playedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	next := m.next
	m.last = body
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":%s,"finish_reason":"stop"}]}`, next)
}

// proxyResult is one session through the proxy.
type proxyResult struct {
	file                  string
	turns, spliced, waits int
	runs                  int
	// degraded counts the turns the proxy sent as they came because
	// something failed or the request did not fit after its wait.
	degraded int
	// bill prices the upstream requests and the host's own as a
	// provider with a prompt cache does.
	bill cachebill.Bill
	// added is what each turn took through the proxy beyond the same
	// request sent straight to the provider.
	added []time.Duration
}

// benchProxy replays real sessions turn by turn through the proxy's
// OpenAI route on the whole stack (the runs real, the provider a recorded
// agent), and measures what the agent pays with a prompt cache against
// the same requests sent whole, and what the proxy adds to a turn.
func benchProxy(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newOfflineScenario("proxy")
	if err != nil {
		return err
	}
	defer sc.close()
	model := &playedModel{}
	upstream := httptest.NewServer(model)
	defer upstream.Close()
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Gateway: sc.gw, Audit: &audit.Service{Store: st.store, Blob: st.blob},
		Store: st.store, Blob: st.blob, MaxRequestBytes: st.cfg.MaxRequestBytes, Logger: slog.New(slog.DiscardHandler),
		Proxy: proxy.Config{OpenAIURL: upstream.URL + "/v1", Trigger: proxy.DefaultTrigger, Target: proxy.DefaultTarget, WaitFor: 2 * time.Minute}}))
	defer srv.Close()
	key := "bench-proxy-" + randomHex(12)
	if err := st.store.AddAPIKey(ctx, tenant, key); err != nil {
		return fmt.Errorf("api key: %w", err)
	}
	files := proxyFiles
	if o.quick {
		files = files[:2]
	}
	var results []proxyResult
	for _, f := range files {
		r, err := proxySession(ctx, st, srv.URL, upstream.URL, key, model, o.dataDir, f)
		if err != nil {
			return fmt.Errorf("proxy, %s: %w", f, err)
		}
		results = append(results, r)
	}
	var ratios []float64
	var added []time.Duration
	turns, spliced, waits, runs, degraded := 0, 0, 0, 0, 0
	for _, r := range results {
		ratios = append(ratios, r.bill.Ratio())
		added = append(added, r.added...)
		turns, spliced, waits, runs, degraded = turns+r.turns, spliced+r.spliced, waits+r.waits, runs+r.runs, degraded+r.degraded
	}
	slices.Sort(ratios)
	median := ratios[len(ratios)/2]
	rep.add(row{id: "12", name: fmt.Sprintf("Proxy: %d real sessions replayed turn by turn through /proxy/openai/v1 at a %d-token limit", len(results), proxyLimit),
		value: fmt.Sprintf("agent's input bill with a prompt cache %.2f× the same requests sent whole (median; %s); %d turns, %d spliced, %d waited for a compaction (%.1f%%), %d degraded, %d runs; added per turn p50 %s, p99 %s",
			median, ratioList(ratios), turns, spliced, waits, 100*float64(waits)/float64(max(turns, 1)), degraded, runs, ms(percentile(added, 50)), ms(percentile(added, 99))),
		compared: "the same requests sent straight to the provider, whole",
		ratio:    fmt.Sprintf("bill %.2f×", median),
		target:   "bill ≤ 0.6× at the median", met: metIf(median <= 0.6)})
	rep.note("12. Proxy (issue 42): each session replayed turn by turn through the proxy's OpenAI route on the bench's stack (the offline summarizer, "+
		"PROXY_TRIGGER %.1f, PROXY_TARGET %.1f), the provider a recorded agent answering each turn with the trajectory's next assistant message. "+
		"The bill prices each upstream request as a provider with a prompt cache does, in bytes: the start it shares with the request "+
		"before read at 0.1×, the rest written at 1.25×; whole is the host's own requests priced the same way (over the limit, as a "+
		"provider would refuse them: the comparison is of cost, not of what fits). Added per turn is a turn's time through the proxy "+
		"minus the same request's straight to the provider.", proxy.DefaultTrigger, proxy.DefaultTarget)
	return nil
}

// proxySession replays one trajectory through the proxy.
func proxySession(ctx context.Context, st *stack, proxyURL, upstreamURL, key string, model *playedModel, dataDir, file string) (proxyResult, error) {
	r := proxyResult{file: file}
	data, err := chatFile(dataDir, file)
	if err != nil {
		return r, err
	}
	var rec struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return r, err
	}
	session := "proxy-" + shortName(file) + "-" + randomHex(4)
	client := &http.Client{Timeout: 5 * time.Minute}
	post := func(url string, body []byte, headers map[string]string) (*http.Response, time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, 0, err
		}
		req.Header.Set("Authorization", "Bearer sk-agent")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return nil, 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, time.Since(start), nil
	}
	for i := 2; i < len(rec.Messages); i++ {
		var role struct {
			Role string `json:"role"`
		}
		if err := json.Unmarshal(rec.Messages[i], &role); err != nil || role.Role != "assistant" {
			continue
		}
		body, err := json.Marshal(map[string]any{"model": agentModel, "messages": rec.Messages[:i]})
		if err != nil {
			return r, err
		}
		model.mu.Lock()
		model.next = rec.Messages[i]
		model.mu.Unlock()
		resp, took, err := post(proxyURL+"/proxy/openai/v1/chat/completions", body, map[string]string{
			proxy.HeaderKey: key, proxy.HeaderSession: session, proxy.HeaderContextLimit: fmt.Sprint(proxyLimit)})
		if err != nil {
			return r, err
		}
		if resp.StatusCode != http.StatusOK {
			return r, fmt.Errorf("turn %d: %s", i, resp.Status)
		}
		state := resp.Header.Get(proxy.HeaderState)
		if strings.HasPrefix(state, "degraded") {
			r.degraded++
			if verbose {
				fmt.Fprintf(os.Stderr, "bench:   proxy, %s turn %d: %s\n", shortName(file), i, state)
			}
		}
		model.mu.Lock()
		sent := model.last
		model.mu.Unlock()
		_, direct, err := post(upstreamURL+"/v1/chat/completions", body, nil)
		if err != nil {
			return r, err
		}
		r.added = append(r.added, max(took-direct, 0))
		r.turns++
		if strings.HasPrefix(state, "spliced") {
			r.spliced++
		}
		if strings.Contains(state, "; waited ") {
			r.waits++
		}
		r.bill.Add(sent, body)
	}
	runs, err := st.store.ListRuns(ctx, store.RunFilter{Tenant: tenant, Session: session})
	if err != nil {
		return r, err
	}
	r.runs = len(runs)
	return r, nil
}

// ratioList prints ratios with two decimals.
func ratioList(ratios []float64) string {
	parts := make([]string, len(ratios))
	for i, r := range ratios {
		parts[i] = fmt.Sprintf("%.2f×", r)
	}
	return strings.Join(parts, ", ")
}
