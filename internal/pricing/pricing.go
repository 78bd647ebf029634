// Package pricing turns a run's token figures into money: what the
// summarizer's calls cost, and what the compaction saves or costs the
// agent over its next calls once prompt caching is counted (a compaction
// that re-writes the agent's cached prefix makes its next call pay the
// cache-write price for it).
package pricing

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	Input      float64 `json:"input"`
	CacheWrite float64 `json:"cache_write"`
	CacheRead  float64 `json:"cache_read"`
	Output     float64 `json:"output"`
}

// Table maps a model name, or the prefix of a family of names, to its
// price; the longest matching entry wins, case ignored.
type Table map[string]Price

// Defaults are list prices of common models when this was written (USD
// per million tokens; Anthropic's cache write is the 5-minute one,
// OpenAI charges no cache write above its input price). They change:
// MODEL_PRICES sets a deployment's own.
func Defaults() Table {
	return Table{
		"gpt-4o":            {Input: 2.50, CacheWrite: 2.50, CacheRead: 1.25, Output: 10},
		"gpt-4o-mini":       {Input: 0.15, CacheWrite: 0.15, CacheRead: 0.075, Output: 0.60},
		"gpt-4.1":           {Input: 2.00, CacheWrite: 2.00, CacheRead: 0.50, Output: 8},
		"gpt-4.1-mini":      {Input: 0.40, CacheWrite: 0.40, CacheRead: 0.10, Output: 1.60},
		"gpt-4.1-nano":      {Input: 0.10, CacheWrite: 0.10, CacheRead: 0.025, Output: 0.40},
		"claude-sonnet-4":   {Input: 3, CacheWrite: 3.75, CacheRead: 0.30, Output: 15},
		"claude-3-7-sonnet": {Input: 3, CacheWrite: 3.75, CacheRead: 0.30, Output: 15},
		"claude-opus-4":     {Input: 15, CacheWrite: 18.75, CacheRead: 1.50, Output: 75},
		"claude-opus-4-5":   {Input: 5, CacheWrite: 6.25, CacheRead: 0.50, Output: 25},
		"claude-haiku-4-5":  {Input: 1, CacheWrite: 1.25, CacheRead: 0.10, Output: 5},
		"claude-3-5-haiku":  {Input: 0.80, CacheWrite: 1, CacheRead: 0.08, Output: 4},
	}
}

// Parse reads MODEL_PRICES, a JSON object of model (or prefix) to price,
// over the defaults. An error names the entry at fault.
func Parse(s string) (Table, error) {
	t := Defaults()
	if strings.TrimSpace(s) == "" {
		return t, nil
	}
	var own map[string]Price
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&own); err != nil {
		return nil, fmt.Errorf(`a JSON object such as {"my-model": {"input": 1, "cache_write": 1.25, "cache_read": 0.1, "output": 5}}: %w`, err)
	}
	for model, p := range own {
		if strings.TrimSpace(model) == "" {
			return nil, fmt.Errorf("an entry has an empty model name")
		}
		if p.Input < 0 || p.CacheWrite < 0 || p.CacheRead < 0 || p.Output < 0 {
			return nil, fmt.Errorf("%s: prices must not be negative", model)
		}
		t[strings.ToLower(model)] = p
	}
	return t, nil
}

// For is model's price: the longest entry the name starts with.
func (t Table) For(model string) (Price, bool) {
	model = strings.ToLower(model)
	best, found := "", false
	var price Price
	for name, p := range t {
		n := strings.ToLower(name)
		if strings.HasPrefix(model, n) && (!found || len(n) > len(best)) {
			best, price, found = n, p, true
		}
	}
	return price, found
}

// Run is what one compaction did, in tokens.
type Run struct {
	// Before and After are the conversation's size; Prefix of After is an
	// unchanged prefix of the request (still cached), Rewrite the rest.
	Before, After, Prefix, Rewrite int
	// SummarizerIn and SummarizerOut are the summarizer's usage, as its
	// endpoint reported it.
	SummarizerIn, SummarizerOut int
}

// Saving is the net saving of a compaction over the agent's next turns
// calls, in USD, after the summarizer's cost (negative: it costs more
// than it saves). Without it, each call reads the whole request from the
// cache; with it, the next call reads the kept prefix and writes the rest
// to the cache, and the later ones read the smaller conversation.
func Saving(r Run, agent, summarizer Price, turns int) (saving, summarizerUSD float64) {
	summarizerUSD = (float64(r.SummarizerIn)*summarizer.Input + float64(r.SummarizerOut)*summarizer.Output) / 1e6
	if turns < 1 {
		return -summarizerUSD, summarizerUSD
	}
	without := float64(turns) * float64(r.Before) * agent.CacheRead
	with := float64(r.Prefix)*agent.CacheRead + float64(r.Rewrite)*agent.CacheWrite + float64(turns-1)*float64(r.After)*agent.CacheRead
	return (without-with)/1e6 - summarizerUSD, summarizerUSD
}
