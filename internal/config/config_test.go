package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/policy"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := load(env(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7233", c.TemporalAddress)
	require.Equal(t, "compaction", c.TaskQueue)
	require.Equal(t, "", c.OpenAIBaseURL, "offline summarizer by default")
	require.Equal(t, 120*time.Second, c.LLMTimeout)
	require.Equal(t, policy.Adaptive, c.DefaultPreset)
	require.Equal(t, 64, c.BlobCacheMB)
	require.Equal(t, "compaction-llm", c.LLMTaskQueue, "summarizer calls get a queue of their own")
	require.Zero(t, c.LLMRatePerSecond, "no rate limit unless set")
}

func TestLLMTaskQueue(t *testing.T) {
	t.Parallel()
	c, err := load(env(map[string]string{"TEMPORAL_TASK_QUEUE": "q", "LLM_RATE_PER_SECOND": "2.5"}))
	require.NoError(t, err)
	require.Equal(t, "q-llm", c.LLMTaskQueue, "the default follows the task queue")
	require.Equal(t, 2.5, c.LLMRatePerSecond)
	c, err = load(env(map[string]string{"LLM_TASK_QUEUE": "openai-account-1"}))
	require.NoError(t, err)
	require.Equal(t, "openai-account-1", c.LLMTaskQueue)
	_, err = load(env(map[string]string{"TEMPORAL_TASK_QUEUE": "q", "LLM_TASK_QUEUE": "q"}))
	require.ErrorContains(t, err, "LLM_TASK_QUEUE")
}

func TestBlobCacheMB(t *testing.T) {
	t.Parallel()
	c, err := load(env(map[string]string{"BLOB_CACHE_MB": "0"}))
	require.NoError(t, err)
	require.Equal(t, 0, c.BlobCacheMB, "0 disables the cache")
	c, err = load(env(map[string]string{"BLOB_CACHE_MB": " 256 "}))
	require.NoError(t, err)
	require.Equal(t, 256, c.BlobCacheMB)
	_, err = load(env(map[string]string{"BLOB_CACHE_MB": "2000000"}))
	require.ErrorContains(t, err, "BLOB_CACHE_MB", "too big to count in bytes safely")
}

func TestErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	tests := map[string]map[string]string{
		"LLM_TIMEOUT":                    {"LLM_TIMEOUT": "soon"},
		"LOG_LEVEL":                      {"LOG_LEVEL": "loud"},
		"S3_PATH_STYLE":                  {"S3_PATH_STYLE": "maybe"},
		"WORKER_ACTIVITIES":              {"WORKER_ACTIVITIES": "-1"},
		"BLOB_CACHE_MB":                  {"BLOB_CACHE_MB": "lots"},
		"LLM_RATE_PER_SECOND":            {"LLM_RATE_PER_SECOND": "-1"},
		"COMPACTOR_DEFAULT_PRESET":       {"COMPACTOR_DEFAULT_PRESET": "fast"},
		"SYNAPSE_COMPACT_PRESERVE_COUNT": {"SYNAPSE_COMPACT_PRESERVE_COUNT": "five"},
		"COMPACTOR_PRESET_FILE":          {"COMPACTOR_PRESET_FILE": "/does/not/exist.json"},
		"OVERRIDE_MAX_ATTEMPTS":          {"OVERRIDE_MAX_ATTEMPTS": "many"},
		"OVERRIDE_ALLOW_BUDGET_OPT_OUT":  {"OVERRIDE_ALLOW_BUDGET_OPT_OUT": "perhaps"},
		"TENANT_RATE_PER_SECOND":         {"TENANT_RATE_PER_SECOND": "-3"},
		"BREAKER_WINDOW":                 {"BREAKER_WINDOW": "a while"},
		"BREAKER_MIN_FREED":              {"BREAKER_MIN_FREED": "2"},
		"MIN_EVENT_INTERVAL":             {"MIN_EVENT_INTERVAL": "often"},
		"STARTUP_TIMEOUT":                {"STARTUP_TIMEOUT": "-1s"},
		"MODEL_CONTEXT_LIMITS":           {"MODEL_CONTEXT_LIMITS": "gpt-4o"},
		"MODEL_TOKEN_FACTORS":            {"MODEL_TOKEN_FACTORS": "claude=9"},
	}
	for name, vars := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := load(env(vars))
			require.ErrorContains(t, err, name)
		})
	}
}

func TestSynapseVariablesOverrideOffloadCompact(t *testing.T) {
	t.Parallel()
	c, err := load(env(map[string]string{
		"SYNAPSE_COMPACT_TRIGGER_THRESHOLD": "20000",
		"SYNAPSE_COMPACT_TARGET_TOKENS":     "6000",
		"SYNAPSE_COMPACT_PRESERVE_COUNT":    "4",
		"SYNAPSE_COMPACT_RETRY_COUNT":       "2",
		"SYNAPSE_COMPACT_MODEL":             "gpt-4.1-mini",
	}))
	require.NoError(t, err)
	p, err := policy.Resolve(policy.OffloadCompact, c.PresetOverrides[policy.OffloadCompact])
	require.NoError(t, err)
	require.Equal(t, 20000, p.History.MaxFreedTokens)
	require.Equal(t, 6000, p.History.TargetTokens)
	require.Equal(t, 4, p.History.KeepLast)
	require.Equal(t, 2, p.History.Attempts)
	require.Equal(t, "gpt-4.1-mini", p.SummarizerModel)
}

func TestCapsLimitsAndBreakerFromTheEnvironment(t *testing.T) {
	t.Parallel()
	c, err := load(env(map[string]string{
		"OVERRIDE_MAX_ATTEMPTS": "4", "OVERRIDE_SUMMARIZER_MODELS": "gpt-4o-mini, gpt-4.1-mini",
		"OVERRIDE_ALLOW_BUDGET_OPT_OUT": "true", "TENANT_CONCURRENT": "5", "BREAKER_RUNS": "0",
		"MIN_EVENT_INTERVAL": "10s", "MIGRATE_DATABASE_URL": "postgres://owner@db/x",
	}))
	require.NoError(t, err)
	require.Equal(t, 4, c.OverrideCaps.MaxAttempts)
	require.Equal(t, 16, c.OverrideCaps.MaxParallelism, "default")
	require.Equal(t, []string{"gpt-4o-mini", "gpt-4.1-mini"}, c.OverrideCaps.SummarizerModels)
	require.True(t, c.OverrideCaps.AllowBudgetOptOut)
	require.Equal(t, 5, c.TenantConcurrent)
	require.Equal(t, 20.0, c.TenantRatePerSecond, "default")
	require.Zero(t, c.BreakerRuns)
	require.Equal(t, 10*time.Second, c.MinEventInterval)
	require.Equal(t, "postgres://owner@db/x", c.MigrateDatabaseURL)
}

func TestStartupTimeout(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]time.Duration{"": 2 * time.Minute, "0": 0, "45s": 45 * time.Second} {
		c, err := load(env(map[string]string{"STARTUP_TIMEOUT": value}))
		require.NoError(t, err)
		require.Equal(t, want, c.StartupTimeout, "STARTUP_TIMEOUT=%q", value)
	}
}

func TestTokenLimits(t *testing.T) {
	t.Parallel()
	c, err := load(env(nil))
	require.NoError(t, err)
	l, err := c.TokenLimits()
	require.NoError(t, err)
	for model, want := range map[string]float64{"claude-sonnet-4": 1.25, "gemini-2.5-pro": 1.15, "gpt-4o": 1, "llama-3": 1.15} {
		got, _ := l.Factor(model)
		require.Equal(t, want, got, "built-in factor of %s", model)
	}
	require.Equal(t, 200000, l.For("claude-sonnet-4"))

	c, err = load(env(map[string]string{
		"MODEL_CONTEXT_LIMITS": "my-model=32000",
		"MODEL_TOKEN_FACTORS":  " claude = 1.3 , my-model=1.05",
	}))
	require.NoError(t, err)
	l, err = c.TokenLimits()
	require.NoError(t, err)
	for model, want := range map[string]float64{"claude-sonnet-4": 1.3, "my-model-2": 1.05, "gemini-2.5-pro": 1.15, "gpt-4o": 1} {
		got, _ := l.Factor(model)
		require.Equal(t, want, got, model)
	}
	require.Equal(t, 32000, l.For("my-model"))
	require.Equal(t, 200000, l.For("claude-sonnet-4"), "the built-in windows stay")
}

func TestTokenFactorErrorsNameTheEntry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		value    string
		mentions []string
	}{
		{"claude", []string{"entry 1", `"claude"`, "model=factor"}},
		{"claude=1.3,gemini=abc", []string{"entry 2", `"gemini=abc"`, "not a number from 1 to 3"}},
		{"claude=0.8", []string{"entry 1", `"0.8"`, "from 1 to 3"}},
		{"claude=3.5", []string{"entry 1", `"3.5"`, "from 1 to 3"}},
		{"=1.2", []string{"entry 1", "empty model name"}},
		{"claude=1.2,Claude=1.3", []string{"entry 2", "already given"}},
	}
	for _, tc := range cases {
		_, err := load(env(map[string]string{"MODEL_TOKEN_FACTORS": tc.value}))
		require.Error(t, err, tc.value)
		require.Contains(t, err.Error(), "MODEL_TOKEN_FACTORS", tc.value)
		for _, m := range tc.mentions {
			require.Contains(t, err.Error(), m, tc.value)
		}
		_, err = Config{ModelFactors: tc.value}.TokenLimits()
		require.ErrorContains(t, err, "MODEL_TOKEN_FACTORS", tc.value)
	}
}

// TestProviderTokens: without ANTHROPIC_API_KEY no provider counts (Claude
// runs are estimated); with it, Anthropic's endpoint at the default or
// the given base; a bad base or timeout stops the process, and the error
// names the variable, never the key.
func TestProviderTokens(t *testing.T) {
	t.Parallel()
	c, err := load(env(nil))
	require.NoError(t, err)
	require.Equal(t, "https://api.anthropic.com", c.AnthropicBaseURL)
	require.Equal(t, 10*time.Second, c.AnthropicCountTimeout)
	p, err := c.ProviderTokens()
	require.NoError(t, err)
	require.Nil(t, p, "offline: no provider counter")

	c, err = load(env(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/", "ANTHROPIC_COUNT_TIMEOUT": "3s"}))
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, c.AnthropicCountTimeout)
	p, err = c.ProviderTokens()
	require.NoError(t, err)
	require.NotNil(t, p)
	require.True(t, p.Handles("claude-sonnet-4-5"))
	require.False(t, p.Handles("gpt-4o"))

	for name, vars := range map[string]map[string]string{
		"ANTHROPIC_BASE_URL":      {"ANTHROPIC_API_KEY": "sk-ant-secret", "ANTHROPIC_BASE_URL": "api.anthropic.com"},
		"ANTHROPIC_COUNT_TIMEOUT": {"ANTHROPIC_API_KEY": "sk-ant-secret", "ANTHROPIC_COUNT_TIMEOUT": "quick"},
	} {
		_, err := load(env(vars))
		require.ErrorContains(t, err, name)
		require.NotContains(t, err.Error(), "sk-ant-secret")
	}
}

// The delivery and erasure queues follow the task queue by default and
// may not share a name with another queue: two workers on one queue
// would share their slots again.
func TestBackgroundTaskQueues(t *testing.T) {
	t.Parallel()
	c, err := load(env(map[string]string{"TEMPORAL_TASK_QUEUE": "q"}))
	require.NoError(t, err)
	require.Equal(t, "q-deliveries", c.DeliveryTaskQueue)
	require.Equal(t, "q-erasures", c.EraseTaskQueue)
	require.Equal(t, 16, c.DeliveryActivities)
	require.Equal(t, 8, c.EraseActivities)
	require.Equal(t, 4, c.DeliveryTenantConcurrent)
	require.False(t, c.TenantFairness, "off: it slowed every tenant on the in-process server")
	require.True(t, c.LLMTenantTurns)
	require.Equal(t, DefaultTenantRunsInFlight, c.TenantRunsInFlight)
	for _, bad := range []map[string]string{
		{"TEMPORAL_TASK_QUEUE": "q", "DELIVERY_TASK_QUEUE": "q"},
		{"ERASE_TASK_QUEUE": "compaction-llm"},
		{"DELIVERY_TASK_QUEUE": "x", "ERASE_TASK_QUEUE": "x"},
		{"DELIVERY_ACTIVITIES": "0"},
		{"DELIVERY_TENANT_CONCURRENT": "-1"},
		{"TENANT_RUNS_IN_FLIGHT": "-1"},
	} {
		_, err := load(env(bad))
		require.Error(t, err, "%v", bad)
	}
	c, err = load(env(map[string]string{"DELIVERY_TENANT_CONCURRENT": "0", "TENANT_FAIRNESS": "true", "LLM_TENANT_TURNS": "false",
		"TENANT_RUNS_IN_FLIGHT": "0"}))
	require.NoError(t, err)
	require.Zero(t, c.TenantRunsInFlight)
	require.Zero(t, c.DeliveryTenantConcurrent)
	require.True(t, c.TenantFairness)
	require.False(t, c.LLMTenantTurns)
}
