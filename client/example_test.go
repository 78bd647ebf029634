package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/client"
	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// fakeAPI answers the few routes the examples call as a deployment
// answers them (api/openapi.yaml), so that the examples run without one:
// an event is accepted (202) as run-1, which has succeeded when waited
// for; its output and one offloaded tool result read back with their
// SHA-256. A real client points at the deployment's URL instead.
func fakeAPI() *httptest.Server {
	output := `[{"role":"user","content":"Fix the build."},{"role":"assistant","content":"Summary of turns 2-40 ..."}]`
	offload := "=== RUN TestParse\n--- FAIL: TestParse (0.00s)\n    parse_test.go:12: want 3, got 4\n"
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions/{session}/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"run_id":"run-1","existing":false,"status":"running","status_url":"/v1/runs/run-1"}`)
	})
	mux.HandleFunc("GET /v1/runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"run_id":"run-1","status":"succeeded","success":true,"tokens_before":182000,"tokens_after":41000,
			"ratio":0.225,"output_sha256":%q,"passes":[],"run":{"id":"run-1","session":"agent-42","preset":"adaptive",
			"status":"succeeded","started_at":"2026-01-02T03:04:05Z"}}`, sum(output))
	})
	mux.HandleFunc("GET /v1/runs/{run}/output", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-SHA256", sum(output))
		fmt.Fprint(w, output)
	})
	mux.HandleFunc("GET /v1/sessions/{session}/offloads/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-SHA256", sum(offload))
		fmt.Fprint(w, offload)
	})
	return httptest.NewServer(mux)
}

// Submit sends the agent's conversation as an event of its session; a
// run that is not finished at once is Accepted, and WaitRun then Output
// get its compacted conversation (checked against its SHA-256).
func ExampleClient_Submit() {
	srv := fakeAPI()
	defer srv.Close()
	ctx := context.Background()
	c := client.New(srv.URL, "ck_live_...", nil)

	res, acc, err := c.Submit(ctx, "agent-42", client.Event{Kind: "threshold", Model: "gpt-4o",
		Conversation: []byte(`[{"role":"user","content":"Fix the build."}]`)})
	if err != nil {
		panic(err)
	}
	if res == nil { // not finished yet: wait for it
		fmt.Println("accepted", acc.RunID)
		run, err := c.WaitRun(ctx, acc.RunID, 30*time.Second)
		if err != nil {
			panic(err)
		}
		res = &run.Result
	}
	fmt.Println(res.Status, res.TokensBefore, "→", res.TokensAfter)
	out, err := c.Output(ctx, res.RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(out) > 0)
	// Output:
	// accepted run-1
	// succeeded 182000 → 41000
	// true
}

// Recover reads back what a reference in the compacted conversation
// names (an offload's id, or an archive id such as <sha256>.m3-7): what
// the recover_context tool answers to the agent. Ask for a line range
// so that a long result does not fill the context again.
func ExampleClient_Recover() {
	srv := fakeAPI()
	defer srv.Close()
	c := client.New(srv.URL, "ck_live_...", nil)
	id := strings.Repeat("ab", 32) // from the reference's "id: ..."
	text, err := c.Recover(context.Background(), "agent-42", id, "")
	if err != nil {
		panic(err)
	}
	fmt.Print(string(text))
	// Output:
	// === RUN TestParse
	// --- FAIL: TestParse (0.00s)
	//     parse_test.go:12: want 3, got 4
}

// A completion webhook's receiver checks every delivery with the
// endpoint's secret (given once, when the endpoint was registered)
// before it trusts the body; a body changed on the way fails.
func ExampleVerifyWebhook() {
	secret, err := webhook.NewSecret() // the deployment's: "whsec_..."
	if err != nil {
		panic(err)
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := client.VerifyWebhook(secret, r.Header, body, time.Now()); err != nil {
			fmt.Println("refused:", errors.Is(err, client.ErrWebhookSignature))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		fmt.Println("verified:", string(body))
	}))
	defer receiver.Close()

	// What the deployment sends (here signed by its own signer).
	deliver := func(body, signed string) {
		headers, err := webhook.Headers("msg_1", time.Now(), []byte(signed), secret)
		if err != nil {
			panic(err)
		}
		req, err := http.NewRequest(http.MethodPost, receiver.URL, strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	body := `{"type":"run.succeeded","data":{"run_id":"run-1","session":"agent-42"}}`
	deliver(body, body)
	deliver(strings.Replace(body, "succeeded", "failed", 1), body)
	// Output:
	// verified: {"type":"run.succeeded","data":{"run_id":"run-1","session":"agent-42"}}
	// refused: true
}
