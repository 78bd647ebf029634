package tokens

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/stretchr/testify/require"
)

func textMsg(role conversation.Role, text string) conversation.Message {
	return conversation.Message{Role: role, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: text}}}
}

func namedMsg(role conversation.Role, name, text string) conversation.Message {
	m := textMsg(role, text)
	m.Extra = map[string]json.RawMessage{"name": json.RawMessage(`"` + name + `"`)}
	return m
}

// cookbookConversation is the example of OpenAI's "How to count tokens with
// tiktoken", for which the API reported 129 prompt tokens (gpt-3.5-turbo,
// gpt-4) and 124 (gpt-4o, gpt-4o-mini).
func cookbookConversation() conversation.Conversation {
	return conversation.Conversation{Format: conversation.FormatOpenAI, Messages: []conversation.Message{
		textMsg("system", "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."),
		namedMsg("system", "example_user", "New synergies will help drive top-line growth."),
		namedMsg("system", "example_assistant", "Things working well together will increase revenue."),
		namedMsg("system", "example_user", "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."),
		namedMsg("system", "example_assistant", "Let's talk later when we're less busy about how to do better."),
		textMsg("user", "This late pivot means we don't have time to boil the ocean for the client deliverable."),
	}}
}

func TestConversationMatchesOpenAIPromptTokens(t *testing.T) {
	t.Parallel()
	conv := cookbookConversation()
	require.Equal(t, 129, Conversation(mustNew(t, Cl100kBase), conv))
	require.Equal(t, 124, Conversation(mustNew(t, O200kBase), conv))
}

func TestConversationIsSumOfPerMessage(t *testing.T) {
	t.Parallel()
	conv := cookbookConversation()
	for _, name := range Encodings() {
		c := mustNew(t, name)
		per := PerMessage(c, conv)
		require.Len(t, per, len(conv.Messages))
		sum := 0
		for i, n := range per {
			require.Equal(t, Message(c, conv.Messages[i]), n)
			sum += n
		}
		want := sum + ReplyPrimingTokens
		if name == Chars {
			want = sum
		}
		require.Equal(t, want, Conversation(c, conv), name)
	}
}

func TestConversationEmpty(t *testing.T) {
	t.Parallel()
	for _, name := range Encodings() {
		c := mustNew(t, name)
		require.Zero(t, Conversation(c, conversation.Conversation{}), name)
		require.Empty(t, PerMessage(c, conversation.Conversation{}), name)
	}
}

func TestMessageBlocks(t *testing.T) {
	t.Parallel()
	m := conversation.Message{Role: conversation.RoleAssistant, Blocks: []conversation.Block{
		{Kind: conversation.KindThinking, Text: "Let me look."},
		{Kind: conversation.KindText, Text: "Running ls."},
		{Kind: conversation.KindToolUse, ToolID: "call_1", ToolName: "bash", Input: `{"command": "ls -la"}`},
		{Kind: conversation.KindImage, Extra: map[string]json.RawMessage{"source": json.RawMessage(`{"data":"aGVsbG8="}`)}},
		{Kind: conversation.KindOther, Extra: map[string]json.RawMessage{"type": json.RawMessage(`"redacted"`)}},
	}}
	result := conversation.Message{Role: conversation.RoleTool, Blocks: []conversation.Block{
		{Kind: conversation.KindToolResult, ToolID: "call_1", Text: "total 0\ndrwx 2 root"},
	}}

	chars := mustNew(t, Chars)
	wantChars := utf8.RuneCountInString("Let me look.") + utf8.RuneCountInString("Running ls.") +
		len("bash") + len(`{"command": "ls -la"}`)
	require.Equal(t, wantChars, Message(chars, m))
	require.Equal(t, utf8.RuneCountInString("total 0\ndrwx 2 root"), Message(chars, result))

	for _, name := range []string{O200kBase, Cl100kBase} {
		c := mustNew(t, name)
		want := c.Count("Let me look.") + c.Count("Running ls.") + c.Count("bash") +
			c.Count(`{"command": "ls -la"}`) + MessageOverheadTokens + c.Count("assistant")
		require.Equal(t, want, Message(c, m), name)
		require.Equal(t, c.Count("total 0\ndrwx 2 root")+MessageOverheadTokens+c.Count("tool"), Message(c, result), name)
	}
}

func TestMessageName(t *testing.T) {
	t.Parallel()
	c := mustNew(t, O200kBase)
	plain := textMsg("user", "hi")
	named := namedMsg("user", "alice", "hi")
	require.Equal(t, Message(c, plain)+c.Count("alice")+NameTokens, Message(c, named))
	// A name that is not a JSON string, or empty, is ignored.
	for _, raw := range []string{`42`, `""`, `{`, `null`} {
		m := textMsg("user", "hi")
		m.Extra = map[string]json.RawMessage{"name": json.RawMessage(raw)}
		require.Equal(t, Message(c, plain), Message(c, m), raw)
	}
	// Characters never include framing.
	chars := mustNew(t, Chars)
	require.Equal(t, 2, Message(chars, named))
}

// TestMessageOnRealData parses real conversations with the conversation
// package and checks every message against its source JSON: the content,
// tool-call names and arguments, role and framing.
func TestMessageOnRealData(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(dataDir, "swe-agent-gemini", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no test data in %s/swe-agent-gemini", dataDir)
	for i, f := range files {
		files[i], err = filepath.Rel(dataDir, f)
		require.NoError(t, err)
	}
	files = append(files, "swe-agent-deepseek/django__django-11564.json")
	o, chars := mustNew(t, O200kBase), mustNew(t, Chars)
	for _, path := range files {
		raw := convtest.Read(t, path)
		conv, err := conversation.ParseAny(raw)
		require.NoError(t, err, path)
		var doc struct {
			Messages []struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc), path)
		require.Len(t, conv.Messages, len(doc.Messages), path)
		for i, src := range doc.Messages {
			wantTok := MessageOverheadTokens + o.Count(src.Role)
			wantChars := 0
			if src.Content != nil {
				wantTok += o.Count(*src.Content)
				wantChars += utf8.RuneCountInString(*src.Content)
			}
			for _, tc := range src.ToolCalls {
				wantTok += o.Count(tc.Function.Name) + o.Count(tc.Function.Arguments)
				wantChars += utf8.RuneCountInString(tc.Function.Name) + utf8.RuneCountInString(tc.Function.Arguments)
			}
			require.Equal(t, wantTok, Message(o, conv.Messages[i]), "%s message %d", path, i)
			require.Equal(t, wantChars, Message(chars, conv.Messages[i]), "%s message %d", path, i)
		}
	}
}
