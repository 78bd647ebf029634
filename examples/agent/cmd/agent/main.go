// Command agent runs the example agent loop (package agent) against an
// OpenAI-compatible endpoint and the orchestrator's HTTP API.
//
//	go run ./examples/agent/cmd/agent -api http://127.0.0.1:8080 -key $KEY \
//	    -llm http://127.0.0.1:9000/v1 -model gpt-4o -limit 40000 conversation.json
//
// Without a model endpoint (no -llm, no $OPENAI_BASE_URL) or with -offline,
// it runs offline: a scripted model in this process plays the agent's
// model, so the dev stack alone shows an offload and its recovery:
//
//	go run ./examples/agent/cmd/agent -api http://127.0.0.1:8080 -key $KEY -offline
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ctxcompact/orchestrator/client"
	"github.com/ctxcompact/orchestrator/examples/agent"
)

func main() {
	api := flag.String("api", "http://127.0.0.1:8080", "the orchestrator's HTTP API")
	key := flag.String("key", os.Getenv("COMPACTOR_API_KEY"), "API key (default $COMPACTOR_API_KEY)")
	llmURL := flag.String("llm", os.Getenv("OPENAI_BASE_URL"), "OpenAI-compatible base URL of the agent's model (default $OPENAI_BASE_URL; when neither is set, -offline)")
	llmKey := flag.String("llm-key", os.Getenv("OPENAI_API_KEY"), "its API key (default $OPENAI_API_KEY)")
	offline := flag.Bool("offline", false, "play the agent's model with a scripted one in this process (no LLM): it runs a test tool whose log the\n"+
		"compaction offloads, then reads the log back with recover_context; the default when no model endpoint is set.\n"+
		"The conversation file is optional, -limit defaults to "+fmt.Sprint(agent.OfflineContextLimit)+" and -overrides to "+agent.OfflineOverrides)
	model := flag.String("model", "gpt-4o", "the agent's model")
	session := flag.String("session", "example", "the agent session")
	limit := flag.Int("limit", 128000, "the model's context limit in tokens")
	threshold := flag.Float64("threshold", 0.5, "share of the limit at which to compact")
	turns := flag.Int("turns", 10, "at most this many model turns")
	overrides := flag.String("overrides", "", `preset overrides sent with each compaction, e.g. {"offload":{"min_tokens":1000}}`)
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *llmURL == "" {
		*offline = true
	}
	if *key == "" || flag.NArg() > 1 || (!*offline && flag.NArg() != 1) {
		fmt.Fprintln(os.Stderr, "usage: agent -key KEY -llm URL [flags] CONVERSATION.json\n       agent -key KEY -offline [flags] [CONVERSATION.json]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	var data []byte
	if flag.NArg() == 1 {
		var err error
		if data, err = os.ReadFile(flag.Arg(0)); err != nil {
			log.Fatal(err)
		}
	}
	var ov json.RawMessage
	if *overrides != "" {
		if !json.Valid([]byte(*overrides)) {
			log.Fatalf("-overrides is not JSON: %s", *overrides)
		}
		ov = json.RawMessage(*overrides)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := agent.Config{
		API: client.New(*api, *key, nil), Session: *session, Model: *model, Overrides: ov,
		ContextLimit: *limit, Threshold: *threshold, MaxTurns: *turns, MaxRecoverLines: 200, Log: log.Printf,
	}
	var rep agent.Report
	var err error
	if *offline {
		// The offline defaults (package agent) unless set on the command line.
		log.Printf("offline: a scripted model plays the agent's model (no LLM)")
		cfg.MaxRecoverLines = 0
		if !set["model"] {
			cfg.Model = ""
		}
		if !set["limit"] {
			cfg.ContextLimit = 0
		}
		rep, err = agent.RunOffline(ctx, cfg, data)
	} else {
		oc := openai.DefaultConfig(*llmKey)
		oc.BaseURL = *llmURL
		cfg.LLM = openai.NewClientWithConfig(oc)
		rep, err = agent.Run(ctx, cfg, data)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("turns %d, compactions %d (runs %s), recovered %d offloads (%s)\n%s\n", rep.Turns, len(rep.Events),
		strings.Join(rep.Events, ", "), len(rep.Recovered), strings.Join(rep.Recovered, ", "), rep.Final)
}
