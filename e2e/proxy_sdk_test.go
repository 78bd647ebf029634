package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// sdkUpstream plays the model behind the proxy for an SDK's agent: each
// call answers, streamed as the provider streams, with a short text and a
// bash tool call, and the last one with "All done."; one call (the third)
// is first refused with a 429 and retry-after, which the SDK must honour.
type sdkUpstream struct {
	provider string
	turns    int
	mu       sync.Mutex
	calls    int
	refused  bool
	bodies   [][]byte
	heads    []http.Header
	// followUp is the index in bodies of the proxy's own follow-up
	// request, after the one answered with a recover_context call (the
	// first request, after the 429, whose conversation names cut content
	// and which offers the tool); 0 until then.
	followUp int
}

// recoverCall streams the model's call to the proxy's recover tool for
// the reference id, in the provider's protocol.
func (u *sdkUpstream) recoverCall(w http.ResponseWriter, id []byte) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(s string) {
		fmt.Fprint(w, s)
		w.(http.Flusher).Flush()
	}
	args, _ := json.Marshal(fmt.Sprintf(`{"id":%q}`, id))
	if u.provider == "anthropic" {
		ev := func(name, data string) { send("event: " + name + "\ndata: " + data + "\n\n") }
		ev("message_start", `{"type":"message_start","message":{"id":"msg_r","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`)
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading the part that was cut. "}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_recover","name":"recover_context","input":{}}}`)
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":%s}}`, args))
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`)
		ev("message_stop", `{"type":"message_stop"}`)
		return
	}
	chunk := func(delta, finish string) {
		send(fmt.Sprintf(`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, finish))
	}
	chunk(`{"role":"assistant","content":"Reading the part that was cut. "}`, "null")
	chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"id":"call_recover","type":"function","function":{"name":"recover_context","arguments":%s}}]}`, args), "null")
	chunk(`{}`, `"tool_calls"`)
	send("data: [DONE]\n\n")
}

func (u *sdkUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.heads = append(u.heads, r.Header.Clone())
	if u.calls == 2 && !u.refused {
		u.refused = true
		u.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		if u.provider == "anthropic" {
			fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
		} else {
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		}
		return
	}
	if id := recoverRef.FindSubmatch(body); u.refused && u.followUp == 0 && id != nil && bytes.Contains(body, []byte(`"name":"recover_context"`)) {
		u.followUp = len(u.bodies)
		u.mu.Unlock()
		u.recoverCall(w, id[1])
		return
	}
	u.calls++
	n := u.calls
	u.mu.Unlock()
	// A model takes its time before the first token; the compactions
	// run meanwhile, as they would behind a real one.
	time.Sleep(200 * time.Millisecond)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	last := n >= u.turns
	send := func(s string) {
		fmt.Fprint(w, s)
		w.(http.Flusher).Flush()
	}
	cmd := fmt.Sprintf(`{"command": "sed -n '%d,%dp' django/db/models/fields/__init__.py"}`, n*10, n*10+40)
	if u.provider == "anthropic" {
		ev := func(name, data string) { send("event: " + name + "\ndata: " + data + "\n\n") }
		ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%03d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`, n))
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("ping", `{"type": "ping"}`)
		if last {
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"All "}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"done."}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
		} else {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading part %d of the field checks."}}`, n))
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_%03d","name":"bash","input":{}}}`, n))
			half := len(cmd) / 2
			for _, part := range []string{cmd[:half], cmd[half:]} {
				p, _ := json.Marshal(part)
				ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":%s}}`, p))
			}
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`)
		}
		ev("message_stop", `{"type":"message_stop"}`)
		return
	}
	chunk := func(delta, finish string) {
		send(fmt.Sprintf(`data: {"id":"chatcmpl-%03d","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", n, delta, finish))
	}
	if last {
		chunk(`{"role":"assistant","content":"All "}`, "null")
		chunk(`{"content":"done."}`, "null")
		chunk(`{}`, `"stop"`)
	} else {
		chunk(fmt.Sprintf(`{"role":"assistant","content":"Reading part %d of the field checks."}`, n), "null")
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"id":"call_%03d","type":"function","function":{"name":"bash","arguments":""}}]}`, n), "null")
		args, _ := json.Marshal(cmd)
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}`, args), "null")
		chunk(`{}`, `"tool_calls"`)
	}
	send("data: [DONE]\n\n")
}

// TestProxySDKAgents runs an agent on each official SDK (the Anthropic
// TypeScript SDK, the OpenAI Node SDK; e2e/node/proxy-agent.mjs) through
// the proxy, streaming and calling tools, long enough to compact several
// times, against a fake provider that speaks each wire protocol. Every
// request the provider gets is checked: it parses, its tool pairs are
// intact, it is under the limit, the task is there verbatim, the agent's
// key went and the compactor's did not; between two compactions each
// request starts with the previous one's bytes; a 429 with retry-after
// reached the SDK, which sent the request again; every compaction is a
// run of the audit. Node and e2e/node/node_modules (bash
// deploy/test-deps.sh) are required: missing, the test fails.
func TestProxySDKAgents(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is required (bash deploy/test-deps.sh)")
	for _, p := range []string{"node/node_modules/@anthropic-ai/sdk/package.json", "node/node_modules/openai/package.json"} {
		_, err = os.Stat(p)
		require.NoError(t, err, "e2e/node/node_modules is required (bash deploy/test-deps.sh)")
	}
	var rec struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(readData(t, "swe-agent-deepseek/django__django-11742.json"), &rec))
	task := rec.Messages[1].Content
	var outputs []string
	for _, m := range rec.Messages {
		if m.Role == "tool" && len(m.Content) > 200 {
			outputs = append(outputs, m.Content)
		}
	}
	require.NotEmpty(t, outputs)
	outFile := filepath.Join(t.TempDir(), "outputs.json")
	b, err := json.Marshal(outputs)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(outFile, b, 0o600))

	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			const turns, limit = 30, 7000
			e := newEnv(t, withoutLLM())
			up := &sdkUpstream{provider: provider, turns: turns}
			upstream := httptest.NewServer(up)
			t.Cleanup(upstream.Close)
			cfg := proxy.Config{WaitFor: 2 * time.Minute, Limits: tokens.DefaultLimits()}
			cfg.Limits.Windows["claude-sonnet-4-5"] = limit
			cfg.Limits.Windows["gpt-4o"] = limit
			base := ""
			if provider == "anthropic" {
				cfg.AnthropicURL = upstream.URL
				base = "/proxy/anthropic"
			} else {
				cfg.OpenAIURL = upstream.URL + "/v1"
				base = "/proxy/openai/v1"
			}
			srv, key := proxyServer(t, e, cfg)

			ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "node/proxy-agent.mjs")
			cmd.Env = append(os.Environ(), "PROXY_URL="+srv.URL+base, "PROVIDER="+provider, "AGENT_KEY=sk-agent-own-key",
				"COMPACTOR_KEY="+key, "TASK="+task, "TOOL_OUTPUTS="+outFile, fmt.Sprintf("TURNS=%d", turns))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			require.NoError(t, err, "the %s SDK agent failed:\n%s", provider, out.String())
			_, res, ok := strings.Cut(out.String(), "proxy-agent: ok ")
			require.True(t, ok, out.String())
			var got struct {
				Final     string   `json:"final"`
				ToolCalls int      `json:"toolCalls"`
				States    []string `json:"states"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(res)), &got))
			require.Equal(t, "All done.", got.Final)
			require.Equal(t, turns-1, got.ToolCalls)

			format, model := conversation.FormatAnthropic, "claude-sonnet-4-5"
			if provider == "openai" {
				format, model = conversation.FormatOpenAI, "gpt-4o"
			}
			counter, err := tokens.New(tokens.EncodingForModel(model))
			require.NoError(t, err)
			up.mu.Lock()
			defer up.mu.Unlock()
			require.NotZero(t, up.followUp, "the model called the proxy's recover tool once its conversation named cut content")
			require.Len(t, up.bodies, turns+2, "every turn once, the refused one again after its retry-after, and the proxy's follow-up")
			followUp := string(up.bodies[up.followUp])
			require.Contains(t, followUp, "recover", "the follow-up answers the call")
			require.NotContains(t, followUp, "recover_context: ", "the answer is the text, not an error")
			spliced := 0
			var shares []float64
			for i, body := range up.bodies {
				h := up.heads[i]
				// The Anthropic SDK 1.x sends the agent's key as a bearer
				// token; either way it goes.
				requireUpstreamRequest(t, fmt.Sprintf("request %d", i), body, h, format, counter, limit, task, "sk-agent-own-key")
				if provider == "anthropic" {
					require.NotEmpty(t, h.Get("Anthropic-Version"), "request %d", i)
				}
			}
			// The provider got turn i's request at turnBody(i): the third
			// turn's twice, refused and then sent again.
			// and the recovering turn's answer came from the proxy's
			// follow-up, one request later.
			turnBody := func(i int) int {
				j := i
				if i >= 2 {
					j++
				}
				if j >= up.followUp {
					j++
				}
				return j
			}
			prevRun := ""
			for i, st := range got.States {
				require.NotContains(t, st, "degraded", "turn %d", i)
				run := runOf(st)
				if run != "" {
					spliced++
				}
				if i > 0 && run != "" && run == prevRun {
					shares = append(shares, sharedPrefix(up.bodies[turnBody(i-1)], up.bodies[turnBody(i)]))
				}
				prevRun = run
			}
			require.Greater(t, spliced, turns/3, "states: %v", got.States)
			require.GreaterOrEqual(t, distinctRuns(got.States), 2, "states: %v", got.States)
			require.NotEmpty(t, shares)
			require.GreaterOrEqual(t, median(shares), 0.8)

			runs, err := e.store.ListRuns(context.Background(), store.RunFilter{Tenant: e.tenant, Session: "sdk-" + provider})
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(runs), 2, "the session compacted more than once")
			for _, r := range runs {
				require.Equal(t, "proxy", r.Trigger)
				require.NotEqual(t, store.RunFailed, r.Status, r.ID)
			}
			t.Logf("%s: %d turns, %d spliced, %d runs, median prefix share %.3f", provider, len(got.States), spliced, len(runs), median(shares))
		})
	}
}

// distinctRuns counts the runs the states say requests were spliced on.
func distinctRuns(states []string) int {
	seen := map[string]bool{}
	for _, s := range states {
		if r := runOf(s); r != "" {
			seen[r] = true
		}
	}
	return len(seen)
}
