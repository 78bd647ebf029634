package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// OpenAI summarizes over any OpenAI-compatible chat completions endpoint.
// It makes exactly one HTTP attempt per call: retries belong to Temporal,
// which records them, so neither go-openai nor the HTTP client retries.
type OpenAI struct {
	client *openai.Client
	cfg    Config
	cls    classifier
}

// NewOpenAI checks cfg and builds the client.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("llm config: BaseURL is empty")
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm config: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, fmt.Errorf("llm config: Model is empty (endpoint %s)", cfg.BaseURL)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("llm config: Timeout %s is negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxTokensFactor < 0 || math.IsNaN(cfg.MaxTokensFactor) || math.IsInf(cfg.MaxTokensFactor, 0) {
		return nil, fmt.Errorf("llm config: MaxTokensFactor %v is not a positive number", cfg.MaxTokensFactor)
	}
	if cfg.MaxTokensFactor == 0 {
		cfg.MaxTokensFactor = DefaultMaxTokensFactor
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")

	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("llm: http.DefaultTransport is %T, not *http.Transport", http.DefaultTransport)
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	// net/http only replays idempotent requests and a chat completion POST
	// is not one, so this client never retries on its own.
	oc.HTTPClient = &http.Client{
		Timeout:   cfg.Timeout,
		Transport: captureTransport{base: base.Clone()},
	}
	return &OpenAI{
		client: openai.NewClientWithConfig(oc),
		cfg:    cfg,
		cls:    classifier{baseURL: cfg.BaseURL, apiKey: cfg.APIKey, now: time.Now},
	}, nil
}

// MaxTokens is the completion budget for a request: the target times the
// factor (offload-compact: target × 1.2), from TargetChars/4 when no token target
// is set, 0 (no limit) when neither is.
func MaxTokens(req Request, factor float64) int {
	target := req.TargetTokens
	if target <= 0 && req.TargetChars > 0 {
		target = (req.TargetChars + CharsPerToken - 1) / CharsPerToken
	}
	if target <= 0 {
		return 0
	}
	if factor <= 0 {
		factor = DefaultMaxTokensFactor
	}
	// The epsilon keeps 8000 × 1.2 at 9600 despite binary floating point.
	return int(math.Ceil(float64(target)*factor - 1e-9))
}

// isReasoningModel matches the families that reject max_tokens and a
// temperature (go-openai validates this before sending).
func isReasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// Summarize implements Summarizer with one chat completion call.
func (o *OpenAI) Summarize(ctx context.Context, req Request) (Response, error) {
	if err := req.Validate(); err != nil {
		return Response{}, badRequest(err)
	}
	p, err := LoadPrompt(req.Prompt)
	if err != nil {
		return Response{}, badRequest(err)
	}
	system, err := p.Render(req)
	if err != nil {
		return Response{}, badRequest(err)
	}
	model := req.Model
	if model == "" {
		model = o.cfg.Model
	}
	// The text goes into the body as it is sent (see withStreamedText).
	ctx, text, err := withStreamedText(ctx, req.Text)
	if err != nil {
		return Response{}, err
	}
	creq := openai.ChatCompletionRequest{
		Model: model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: text},
		},
	}
	if req.Prompt == PromptJudge {
		// Structured output: the verdict is parsed, never read as prose.
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name: JudgeSchemaName, Schema: JudgeSchema, Strict: true,
			},
		}
	}
	maxTokens := MaxTokens(req, o.cfg.MaxTokensFactor)
	if isReasoningModel(model) {
		creq.MaxCompletionTokens = maxTokens
	} else {
		creq.MaxTokens = maxTokens
		// go-openai drops a zero temperature (omitempty, go-openai issue
		// #9); the smallest float32 is its maintainers' way to send ~0.
		creq.Temperature = math.SmallestNonzeroFloat32
	}

	capture := &responseCapture{}
	resp, err := o.client.CreateChatCompletion(withCapture(ctx, capture), creq)
	if err != nil {
		return Response{}, o.cls.classify(err, capture)
	}
	if len(resp.Choices) == 0 || strings.TrimSpace(resp.Choices[0].Message.Content) == "" {
		return Response{}, o.cls.classify(fmt.Errorf("model %s at %s: %w", model, o.cfg.BaseURL, errEmptyCompletion), capture)
	}
	answered := resp.Model
	if answered == "" {
		answered = model
	}
	return Response{
		Text:             resp.Choices[0].Message.Content,
		Model:            answered,
		PromptVersion:    p.Version,
		PromptTokens:     resp.Usage.PromptTokens,
		CompletionTokens: resp.Usage.CompletionTokens,
	}, nil
}

// Ping says whether the endpoint can be reached: it lists the models
// (GET {base}/models). An endpoint that answers at all, even with an HTTP
// error (some compatible servers have no /models), is reachable; only a
// failed connection or a timeout is not. The readiness probe reports it,
// since an unreachable summarizer degrades every run to the offline one.
func (o *OpenAI) Ping(ctx context.Context) error {
	_, err := o.client.ListModels(ctx)
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	if err == nil || errors.As(err, &apiErr) || errors.As(err, &reqErr) {
		return nil
	}
	return fmt.Errorf("reach the summarizer endpoint: %w", err)
}
