// Command agent runs the example agent loop (package agent) against an
// OpenAI-compatible endpoint and the orchestrator's HTTP API.
//
//	go run ./examples/agent/cmd/agent -api http://127.0.0.1:8080 -key $KEY \
//	    -llm http://127.0.0.1:9000/v1 -model gpt-4o -limit 40000 conversation.json
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ctxcompact/orchestrator/client"
	"github.com/ctxcompact/orchestrator/examples/agent"
)

func main() {
	api := flag.String("api", "http://127.0.0.1:8080", "the orchestrator's HTTP API")
	key := flag.String("key", os.Getenv("COMPACTOR_API_KEY"), "API key (default $COMPACTOR_API_KEY)")
	llmURL := flag.String("llm", os.Getenv("OPENAI_BASE_URL"), "OpenAI-compatible base URL of the agent's model (default $OPENAI_BASE_URL)")
	llmKey := flag.String("llm-key", os.Getenv("OPENAI_API_KEY"), "its API key (default $OPENAI_API_KEY)")
	model := flag.String("model", "gpt-4o", "the agent's model")
	session := flag.String("session", "example", "the agent session")
	limit := flag.Int("limit", 128000, "the model's context limit in tokens")
	threshold := flag.Float64("threshold", 0.5, "share of the limit at which to compact")
	turns := flag.Int("turns", 10, "at most this many model turns")
	flag.Parse()
	if flag.NArg() != 1 || *key == "" || *llmURL == "" {
		fmt.Fprintln(os.Stderr, "usage: agent -key KEY -llm URL [flags] CONVERSATION.json")
		flag.PrintDefaults()
		os.Exit(2)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	oc := openai.DefaultConfig(*llmKey)
	oc.BaseURL = *llmURL
	rep, err := agent.Run(ctx, agent.Config{
		API: client.New(*api, *key, nil), Session: *session, LLM: openai.NewClientWithConfig(oc), Model: *model,
		ContextLimit: *limit, Threshold: *threshold, MaxTurns: *turns, MaxRecoverLines: 200, Log: log.Printf,
	}, data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("turns %d, compactions %d, recovered %d offloads\n%s\n", rep.Turns, len(rep.Events), len(rep.Recovered), rep.Final)
}
