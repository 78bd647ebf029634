package tokens

import "strings"

// EncodingForModel returns the encoding that counts tokens for a model name.
//
// OpenAI models get their own encoding: gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and
// the o1/o3/o4 reasoning models use o200k_base; gpt-4 (and gpt-4-turbo),
// gpt-3.5 and the text-embedding-3 and ada-002 embeddings use cl100k_base.
// Every other model (Claude, DeepSeek, Gemini, Llama, unknown names) gets
// o200k_base as an ESTIMATE: those vendors use tokenizers of their own that
// are not available offline, and a modern 200K-vocabulary BPE lands within
// roughly 10-30% of them on English and code. Such counts are multiplied
// by a safety factor (see Factors and Scale) so that they err on the side
// of a larger conversation.
//
// Matching ignores case, a provider prefix ("openai/gpt-4o") and a
// fine-tune prefix ("ft:gpt-4o-mini:org::id").
func EncodingForModel(model string) string {
	m := normalizeModel(model)
	for _, p := range []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4"} {
		if strings.HasPrefix(m, p) {
			return O200kBase
		}
	}
	for _, p := range []string{"gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada-002"} {
		if strings.HasPrefix(m, p) {
			return Cl100kBase
		}
	}
	return O200kBase
}

// normalizeModel lower-cases a model name and strips a provider prefix
// ("openai/", "deepseek-ai/") and an OpenAI fine-tune prefix ("ft:").
func normalizeModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	m = strings.TrimPrefix(m, "ft:")
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return m
}
