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
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/cachebill"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// proxyLimit is measurement 12's context limit: the slowly
// growing OpenAI session "compacted at 65% of a 20,000-token limit".
const proxyLimit = 20_000

// proxyGrowth is how long measurement 12 plays each session: its turns
// are replayed again (with fresh call ids, as the session-life bench
// does) until the host's whole conversation is this many times the
// limit, a long-running agent's session rather than one that ends soon
// after its first compaction.
const proxyGrowth = 6

// proxyTurnTime is how long the played model takes to answer a turn. A
// real agent's turn (the model's answer, then its tool run) takes
// seconds, during which a compaction started at the trigger finishes;
// answering at once would make every compaction lag tens of turns behind
// the conversation it compacts, which no agent sees.
const proxyTurnTime = 300 * time.Millisecond

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
	// turnTime is how long it takes to answer (proxyTurnTime).
	turnTime time.Duration
	mu       sync.Mutex
	next     json.RawMessage
	// last is the body of the last request the model got.
	last []byte
}

func (m *playedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	next := m.next
	m.last = body
	m.mu.Unlock()
	time.Sleep(m.turnTime)
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
	// provider with a prompt cache does; recorded is the bill when the
	// recorded turns first ran out.
	bill, recorded cachebill.Bill
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
	// -quick: two sessions grown to twice the limit, the model a little
	// faster, about a minute in all.
	model, growth := &playedModel{turnTime: proxyTurnTime}, proxyGrowth
	if o.quick {
		model.turnTime, growth = proxyTurnTime/3, 2
	}
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
		r, err := proxySession(ctx, st, srv.URL, upstream.URL, key, model, o.dataDir, f, growth)
		if err != nil {
			return fmt.Errorf("proxy, %s: %w", f, err)
		}
		results = append(results, r)
	}
	var ratios, recorded []float64
	var added []time.Duration
	turns, spliced, waits, runs, degraded := 0, 0, 0, 0, 0
	for _, r := range results {
		ratios = append(ratios, r.bill.Ratio())
		recorded = append(recorded, r.recorded.Ratio())
		added = append(added, r.added...)
		turns, spliced, waits, runs, degraded = turns+r.turns, spliced+r.spliced, waits+r.waits, runs+r.runs, degraded+r.degraded
	}
	slices.Sort(ratios)
	slices.Sort(recorded)
	median := medianOf(ratios)
	rep.add(row{id: "12", name: fmt.Sprintf("Proxy: %d real sessions replayed turn by turn through /proxy/openai/v1 at a %d-token limit, grown to %d× the limit", len(results), proxyLimit, growth),
		value: fmt.Sprintf("agent's input bill with a prompt cache %.2f× the same requests sent whole (median; %s), %.2f× at the recorded length (%s); %d turns, %d spliced, %d waited for a compaction (%.1f%%), %d degraded, %d runs; added per turn p50 %s, p99 %s",
			median, ratioList(ratios), medianOf(recorded), ratioList(recorded), turns, spliced, waits, 100*float64(waits)/float64(max(turns, 1)), degraded, runs, ms(percentile(added, 50)), ms(percentile(added, 99))),
		compared: "the same requests sent straight to the provider, whole",
		ratio:    fmt.Sprintf("bill %.2f×", median),
		target:   "bill ≤ 0.6× at the median", met: metIf(median <= 0.6)})
	rep.note("12. Proxy (issue 42): each session replayed turn by turn through the proxy's OpenAI route on the bench's stack (the offline summarizer, "+
		"PROXY_TRIGGER %.1f, PROXY_TARGET %.1f), the provider a recorded agent answering each turn with the trajectory's next assistant message. "+
		"The bill prices each upstream request as a provider with a prompt cache does, in bytes: the start it shares with the request "+
		"before read at 0.1×, the rest written at 1.25×; whole is the host's own requests priced the same way (over the limit, as a "+
		"provider would refuse them: the comparison is of cost, not of what fits). Each session's turns are replayed again with fresh "+
		"call ids, as the session-life bench does, until the host's conversation is %d× the limit; the bill at the recorded length "+
		"(when the turns first ran out) is reported beside it: a session that ends soon after its first compaction saves little, "+
		"since the compaction rewrites the cache once and the turns after it are few. Added per turn is a turn's time through the "+
		"proxy minus the same request's straight to the provider.", proxy.DefaultTrigger, proxy.DefaultTarget, growth)
	return nil
}

// proxySession replays one trajectory through the proxy.
func proxySession(ctx context.Context, st *stack, proxyURL, upstreamURL, key string, model *playedModel, dataDir, file string, growth int) (proxyResult, error) {
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
	counter, err := tokens.New(tokens.EncodingForModel(agentModel))
	if err != nil {
		return r, err
	}
	// A trajectory ends with the agent's last call (its submit), which
	// has no result: replayed again after it, the conversation would hold
	// a call without its result, which a provider refuses. It is left
	// out, as the session-life bench leaves out turns without results.
	if n := len(rec.Messages); n > 0 && !answeredLast(rec.Messages[n-1]) {
		rec.Messages = rec.Messages[:n-1]
	}
	host := slices.Clone(rec.Messages[:min(2, len(rec.Messages))])
	for cycle := 0; ; cycle++ {
		if cycle > 0 {
			doc, err := json.Marshal(map[string]any{"messages": host})
			if err != nil {
				return r, err
			}
			conv, err := conversation.Parse(doc, conversation.FormatOpenAI)
			if err != nil {
				return r, fmt.Errorf("cycle %d: %w", cycle, err)
			}
			if cycle == 1 {
				r.recorded = r.bill
			}
			if tokens.Conversation(counter, conv) >= growth*proxyLimit {
				break
			}
		}
		for i := 2; i < len(rec.Messages); i++ {
			m := rec.Messages[i]
			if cycle > 0 {
				if m, err = freshCallIDs(m, cycle); err != nil {
					return r, err
				}
			}
			if err := proxyTurn(&r, post, proxyURL, upstreamURL, key, session, model, host, m); err != nil {
				return r, fmt.Errorf("cycle %d, message %d: %w", cycle, i, err)
			}
			host = append(host, m)
		}
	}
	runs, err := st.store.ListRuns(ctx, store.RunFilter{Tenant: tenant, Session: session})
	if err != nil {
		return r, err
	}
	r.runs = len(runs)
	return r, nil
}

// poster posts a body with headers and says how long the answer took.
type poster func(url string, body []byte, headers map[string]string) (*http.Response, time.Duration, error)

// proxyTurn sends the host's conversation through the proxy when next is
// the assistant's turn (the model answers with it), and the same request
// straight to the provider, for the time the proxy adds.
func proxyTurn(r *proxyResult, post poster, proxyURL, upstreamURL, key, session string, model *playedModel,
	host []json.RawMessage, next json.RawMessage) error {
	var role struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal(next, &role); err != nil || role.Role != "assistant" {
		return err
	}
	i := len(host)
	body, err := json.Marshal(map[string]any{"model": agentModel, "messages": host})
	if err != nil {
		return err
	}
	model.mu.Lock()
	model.next = next
	model.mu.Unlock()
	resp, took, err := post(proxyURL+"/proxy/openai/v1/chat/completions", body, map[string]string{
		proxy.HeaderKey: key, proxy.HeaderSession: session, proxy.HeaderContextLimit: fmt.Sprint(proxyLimit)})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("turn %d: %s", i, resp.Status)
	}
	state := resp.Header.Get(proxy.HeaderState)
	if strings.HasPrefix(state, "degraded") {
		r.degraded++
		if verbose {
			fmt.Fprintf(os.Stderr, "bench:   proxy, %s turn %d: %s\n", session, i, state)
		}
	}
	model.mu.Lock()
	sent := model.last
	model.mu.Unlock()
	_, direct, err := post(upstreamURL+"/v1/chat/completions", body, nil)
	if err != nil {
		return err
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
	return nil
}

// answeredLast says whether m, a trajectory's last message, needs no
// result: it is not an assistant message with tool calls.
func answeredLast(m json.RawMessage) bool {
	var v struct {
		Role      string            `json:"role"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
	}
	return json.Unmarshal(m, &v) != nil || v.Role != "assistant" || len(v.ToolCalls) == 0
}

// freshCallIDs is message m with its tool call ids suffixed for cycle,
// so that a replayed turn's calls pair with their own results only.
func freshCallIDs(m json.RawMessage, cycle int) (json.RawMessage, error) {
	var v map[string]any
	if err := json.Unmarshal(m, &v); err != nil {
		return nil, err
	}
	suffix := fmt.Sprintf("-c%d", cycle)
	if id, ok := v["tool_call_id"].(string); ok {
		v["tool_call_id"] = id + suffix
	}
	if calls, ok := v["tool_calls"].([]any); ok {
		for _, c := range calls {
			if call, ok := c.(map[string]any); ok {
				if id, ok := call["id"].(string); ok {
					call["id"] = id + suffix
				}
			}
		}
	}
	return json.Marshal(v)
}

// medianOf is the median of sorted xs.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// ratioList prints ratios with two decimals.
func ratioList(ratios []float64) string {
	parts := make([]string, len(ratios))
	for i, r := range ratios {
		parts[i] = fmt.Sprintf("%.2f×", r)
	}
	return strings.Join(parts, ", ")
}
