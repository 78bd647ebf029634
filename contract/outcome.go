package contract

import "encoding/json"

// Outcome is a run's result, the one type every reader gets: the
// Compaction workflow's result, the commit step's, the HTTP answer of a
// finished run (which adds the conversation), the MCP checkpoint, the
// completion webhook, `starter compact` and `starter replay`, the audit
// and the Go client (which keeps a standalone copy, checked field by
// field against this one). Its fields are the run's row (store.OutcomeOf
// maps them) and the Stats its commit recorded, embedded so that a field
// added to Stats is recorded, read back and answered with no mapping of
// its own. Keys and figures only, never conversation text.
type Outcome struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// ErrorClass says what kind of failure a failed run had
	// (store.ErrorClass); Error is then a message safe to show.
	ErrorClass string `json:"error_class,omitempty"`
	// ErrorCause says why the dependency call behind a failed run's error
	// failed, in the words webhook deliveries use: "refused", "timeout",
	// "dns", "tls", "connection reset", "connection failed", or "http 503"
	// when an answer came (set for the summarizer's failures).
	ErrorCause   string  `json:"error_cause,omitempty"`
	TokensBefore int     `json:"tokens_before"`
	TokensAfter  int     `json:"tokens_after"`
	Ratio        float64 `json:"ratio"`
	LevelAfter   string  `json:"level_after,omitempty"`
	// Degraded is set when the run reached its result through a fallback
	// (the summarizer failed and the offline summary stood in, a summary
	// was replaced after failing its checks, the LLM judge was
	// unreachable); Stats.DegradedReasons say which, without the
	// operator's hosts or errors.
	Degraded bool `json:"degraded"`
	// Success is offload-compact's success: the run committed under its
	// limit and the history summary, if one was wanted, was made.
	Success bool `json:"success"`
	// Counter is what measured the sizes: the encoding, with the model
	// family's safety margin when it is not the model's own tokenizer
	// (e.g. "o200k_base×1.25 (claude)"), or "chars". The stats record it
	// as "encoding" (store.RunStats).
	Counter string `json:"counter,omitempty"`
	// FreedTokens is offload-compact's CompactResult figure: tokens
	// before less tokens after.
	FreedTokens  int    `json:"freed_tokens"`
	OutputKey    string `json:"output_key,omitempty"`
	OutputSHA256 string `json:"output_sha256,omitempty"`
	// Stats are the figures only the run's stats hold. A run that did
	// not commit has none (Passes is then empty).
	Stats
}

// Stats are what a run's commit records in its stats beside the row
// (runs.stats, through store.RunStats), each one a field of the run's
// Outcome as it is answered: a new outcome figure is added here, once.
type Stats struct {
	// Format is the conversation's wire format (openai, anthropic, react).
	Format      string `json:"format,omitempty"`
	LevelBefore string `json:"level_before,omitempty"`
	// Drift is the verdict of the run's last drift check: "", "passed",
	// "repaired" or "patched".
	Drift string `json:"drift,omitempty"`
	// BehaviourDrift names the signs, in what the agent did since the
	// previous compaction, that it drifted from its task
	// (clarification, premature-completion, off-target; plan.Behaviour):
	// a Goal Drift Warning was appended at the output's tail for them
	// unless GoalDriftWarning is false.
	BehaviourDrift []string `json:"behaviour_drift,omitempty"`
	// GoalDriftWarning says the warning was appended at the output's
	// tail (not when a tool call is pending there, or it would not fit).
	GoalDriftWarning bool `json:"goal_drift_warning,omitempty"`
	// HistoryFailed is offload-compact's "success: false": the summary
	// could not be made and the history was left unchanged.
	HistoryFailed bool `json:"history_failed"`
	// DegradedReasons are the fallbacks the run went through (see
	// Outcome.Degraded).
	DegradedReasons []string `json:"degraded_reasons,omitempty"`
	// OverLimit is set when the output is still over the model's limit
	// (status over_limit); OverLimitReason says why.
	OverLimit       bool   `json:"over_limit"`
	OverLimitReason string `json:"over_limit_reason,omitempty"`
	// LevelReason says why the run ended RED or above when no step that
	// keeps the recent turns' structure could bring it lower.
	LevelReason string `json:"level_reason,omitempty"`
	// Unit is the unit of the sizes: "tokens", or "chars" (react-two-layer).
	Unit         string `json:"unit,omitempty"`
	ContextLimit int    `json:"context_limit,omitempty"`
	// TokenCounting says how tokens_after, the size checked against the
	// limit, was counted: "encoding" (an exact local tokenizer of the
	// model family, such as o200k_base for OpenAI models, or characters),
	// "provider" (the provider's counting endpoint: Anthropic's
	// count_tokens for Claude when ANTHROPIC_API_KEY is set) or
	// "estimate" (o200k_base times the family's calibrated factor, also
	// when the endpoint failed). Empty in runs committed before it was
	// recorded.
	TokenCounting string `json:"token_counting,omitempty"`
	// PreservedCount and DeletedOffloads are offload-compact's
	// CompactResult figures.
	PreservedCount  int `json:"preserved_count"`
	DeletedOffloads int `json:"deleted_offloads"`
	// ContextCompression is the ReAct two-layer design's stats for a ReAct
	// trajectory; a bare list of turns has no place for them in the
	// conversation.
	ContextCompression json.RawMessage `json:"context_compression,omitempty"`
	// Recommendation is the three-tier design's action for the level after.
	Recommendation string `json:"recommendation,omitempty"`
	// ArchiveKey names the archived original (the row's, when it has one).
	ArchiveKey string `json:"archive_key,omitempty"`
	// HandoffKey names the fresh session's conversation, made when a run
	// ends CRITICAL (or over its limit) or on a checkpoint event.
	HandoffKey    string     `json:"handoff_key,omitempty"`
	HandoffSHA256 string     `json:"handoff_sha256,omitempty"`
	Passes        []PassStat `json:"passes"`
	// Cache is how much of the agent's prompt cache the run keeps: the
	// output's tokens that are an unchanged prefix of the request, and
	// the ones the agent's next call writes to its cache again.
	Cache *CacheFigures `json:"cache,omitempty"`
	// SessionLog is the session's append-only summary log after the run.
	// Its name is from before the docs called it the summary log (seed
	// 003's "session log" is another thing, the log never summarized);
	// it stays, since recorded runs and histories hold it.
	SessionLog *LogFigures `json:"session_log,omitempty"`
	// SummaryLog is SessionLog under the name the docs use; both are set.
	SummaryLog *LogFigures `json:"summary_log,omitempty"`
	// Cost is what the run cost and saves, after prompt-cache effects.
	Cost *CostFigures `json:"cost,omitempty"`
}

// CostFigures are a run's money figures (package pricing), in US dollars
// at the deployment's price table (MODEL_PRICES).
type CostFigures struct {
	// SummarizerInputTokens and SummarizerOutputTokens are the
	// summarizer's usage, as its endpoint reported it (0 offline).
	SummarizerInputTokens  int     `json:"summarizer_input_tokens"`
	SummarizerOutputTokens int     `json:"summarizer_output_tokens"`
	SummarizerUSD          float64 `json:"summarizer_usd"`
	// CacheRewriteTokens are the output's tokens the agent's next call
	// writes to its prompt cache again; TokensShed what the run removed.
	CacheRewriteTokens int `json:"cache_rewrite_tokens"`
	TokensShed         int `json:"tokens_shed"`
	// NetSavingUSD is what the compaction saves over the agent's next
	// Turns calls, after the summarizer's cost and the cache re-write
	// (negative: it costs more than it saves over that horizon).
	NetSavingUSD float64 `json:"net_saving_usd"`
	// Turns is that horizon: the agent's calls since the session's
	// previous compaction when an incremental event showed them
	// (TurnsSource "observed"), else the deployment's COST_TURNS
	// ("default").
	Turns       int    `json:"turns"`
	TurnsSource string `json:"turns_source,omitempty"`
	// Priced is false when the agent's model has no price in the table:
	// the money figures are then 0.
	Priced bool `json:"priced"`
}

// The sources of CostFigures.Turns.
const (
	TurnsObserved = "observed"
	TurnsDefault  = "default"
)

// CacheFigures are a run's prompt-cache effects, in the run's unit.
type CacheFigures struct {
	// PrefixTokens of the output are a byte-identical prefix of the
	// request (as the provider sees it): they stay cached.
	PrefixTokens int `json:"prefix_tokens"`
	// RewriteTokens are the rest of the output, which the agent's next
	// call writes to the cache again.
	RewriteTokens int `json:"rewrite_tokens"`
	// PrefixShare is PrefixTokens over the output's size.
	PrefixShare float64 `json:"prefix_share"`
}

// LogFigures describe a session log (policy.SessionLog) after a run.
type LogFigures struct {
	// Blocks and Tokens are the log's blocks in the output and their size.
	Blocks int `json:"blocks"`
	Tokens int `json:"tokens"`
	// Appended is how many blocks the run added (0 or 1, 2 with a
	// reflection).
	Appended int `json:"appended"`
	// Reflected is set when the run condensed the log's earlier blocks
	// into one (it then changed the prefix the agent had cached).
	Reflected bool `json:"reflected"`
}
