package activities

import (
	"context"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func TestConvCacheHandsOutCopies(t *testing.T) {
	t.Parallel()
	var c convCache
	conv := conversation.Conversation{Format: conversation.FormatOpenAI, Messages: []conversation.Message{
		{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "fix src/a.go"}}},
	}}
	c.add("k", conv, 100)
	conv.Messages[0].Blocks[0].Text = "changed by the caller after add"

	got, size, ok := c.get("k")
	require.True(t, ok)
	require.Equal(t, int64(100), size, "the size of the JSON it came from")
	require.Equal(t, "fix src/a.go", got.Messages[0].Blocks[0].Text, "the cache kept its own copy")
	got.Messages[0].Blocks[0].Text = "changed by a step"
	again, _, ok := c.get("k")
	require.True(t, ok)
	require.Equal(t, "fix src/a.go", again.Messages[0].Blocks[0].Text, "a step's change does not reach the cache")

	_, _, ok = c.get("missing")
	require.False(t, ok)

	// The entry is detached: it keeps no string of the caller's alive.
	orig := conversation.Conversation{Format: conversation.FormatOpenAI, Messages: []conversation.Message{
		{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: strings.Repeat("x", 64)}}},
	}}
	c.add("k2", orig, 100)
	kept, _, ok := c.get("k2")
	require.True(t, ok)
	require.Equal(t, orig.Messages[0].Blocks[0].Text, kept.Messages[0].Blocks[0].Text)
	require.NotSame(t, unsafe.StringData(orig.Messages[0].Blocks[0].Text), unsafe.StringData(kept.Messages[0].Blocks[0].Text))
}

func TestConvCacheIsBoundedByBytes(t *testing.T) {
	t.Parallel()
	var c convCache
	conv := conversation.Conversation{Format: conversation.FormatOpenAI}
	size := int64(convCacheBytes / 5)
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		c.add(k, conv, size)
	}
	_, _, ok := c.get("a")
	require.False(t, ok, "the oldest went when the bound was passed")
	_, _, ok = c.get("f")
	require.True(t, ok)
	require.LessOrEqual(t, c.bytes, int64(convCacheBytes))
	require.Equal(t, int64(5)*size, c.bytes)

	c.add("huge", conv, convCacheBytes/4+1)
	_, _, ok = c.get("huge")
	require.False(t, ok, "one entry larger than a quarter of the bound is not kept")
}

// TestLoadFromTheCacheReadsNothing: a cached conversation is handed out
// with its size without reading S3 (no blob store here), and only to its
// own tenant: the ownership check comes first.
func TestLoadFromTheCacheReadsNothing(t *testing.T) {
	t.Parallel()
	a := &Activities{}
	key := blob.ContentKey("acme", "work", blob.SHA256Hex([]byte(t.Name())))
	conv := conversation.Conversation{Format: conversation.FormatOpenAI, Messages: []conversation.Message{
		{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "fix src/a.go"}}},
	}}
	a.convs.add(key, conv, 1234)

	got, size, err := a.load(context.Background(), "acme", key)
	require.NoError(t, err)
	require.Equal(t, int64(1234), size)
	require.Equal(t, conv, got)

	_, _, err = a.load(context.Background(), "globex", key)
	require.Error(t, err, "another tenant's key is refused even when cached")
	require.Contains(t, err.Error(), "read")
}
