package tokens_test

import (
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// A conversation is measured with the encoding of the agent's model:
// each message's text and tool calls plus the chat framing OpenAI
// documents, and the reply's priming for the whole.
func ExampleConversation() {
	conv, err := conversation.ParseAny([]byte(`[
		{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Fix the failing test in parser_test.go."}]`))
	if err != nil {
		panic(err)
	}
	c, err := tokens.New(tokens.EncodingForModel("gpt-4o"))
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Name(), tokens.PerMessage(c, conv), tokens.Conversation(c, conv))
	// Output:
	// o200k_base [10 13] 26
}

// Models whose tokenizer is not available offline are counted with
// o200k_base as an estimate, scaled up by their family's safety factor
// so that the estimate errs on the side of a larger conversation.
func ExampleEncodingForModel() {
	for _, model := range []string{"gpt-4o-mini", "gpt-4-turbo", "openai/gpt-5", "claude-sonnet-4"} {
		fmt.Println(model, tokens.EncodingForModel(model))
	}
	f, prefix := tokens.DefaultLimits().Factor("claude-sonnet-4")
	fmt.Println("claude factor", f, prefix)
	// Output:
	// gpt-4o-mini o200k_base
	// gpt-4-turbo cl100k_base
	// openai/gpt-5 o200k_base
	// claude-sonnet-4 o200k_base
	// claude factor 1.25 claude
}

// The context limit of a model comes from the deployment's table
// (MODEL_LIMITS), matched by the longest model-name prefix.
func ExampleLimits_For() {
	l := tokens.DefaultLimits()
	for _, model := range []string{"gpt-4o", "claude-sonnet-4-5", "some-unknown-model"} {
		fmt.Println(model, l.For(model))
	}
	// Output:
	// gpt-4o 128000
	// claude-sonnet-4-5 200000
	// some-unknown-model 128000
}
