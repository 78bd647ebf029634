package strategy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Reference layout (the three-tier reference block, plus offload-compact's
// machine-readable pointer as the last line so that both restore paths find
// the offload). A reference names the offload by its id (the content's
// SHA-256), never by its storage key: the agent recovers it with the
// RecoverTool, and the store's layout is none of its business.
const (
	refHeadingPrefix = "## Offloaded: "
	refPointerPrefix = "Tool result is at: "
	// PreviewMaxLines and PreviewMaxChars bound a reference preview (the
	// three-tier tier-1 offload: "first 10 lines", result[:500]).
	PreviewMaxLines = 10
	PreviewMaxChars = 500
	// MaxKeyLen bounds a storage key (the S3 limit), so a reference stays
	// small and planning's size check holds.
	MaxKeyLen = 1024
	// planningKey stands in for the real key when PlanOffload checks that
	// a reference is smaller than the result it replaces; its id is as
	// long as a real one (a SHA-256).
	planningKey = "tenants/tenant-0000000000/offload/01/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// OffloadCandidate is a tool result worth moving to storage.
type OffloadCandidate struct {
	// Msg and Block locate the tool_result block.
	Msg, Block int
	// ToolID is the call id the result answers; ApplyOffload checks it to
	// catch a plan made for another version of the conversation.
	ToolID string
	// ToolName is the called tool's name (taken from the call when the
	// result does not carry it).
	ToolName string
	// Tokens is the result text's size in the planning counter's unit.
	Tokens int
}

// OffloadOptions tunes PlanOffloadWith.
type OffloadOptions struct {
	// MinTokens: only results larger than this are candidates (three-tier
	// tier 1: 15,000 tokens).
	MinTokens int
	// Protected messages are never offloaded (nil: none).
	Protected []bool
	// IncludeErrors also offers error results; by default they stay in
	// context (the post-processing table: errors are always kept).
	IncludeErrors bool
	// PreviewLines and PreviewChars are the preview limits the caller will
	// use (0: the tier-1 preview's 10 lines, 500 characters); planning needs them to
	// check that a reference is smaller than its result.
	PreviewLines, PreviewChars int
}

// PlanOffloadWith lists, in conversation order, the tool results larger
// than opts.MinTokens that are not protected, not errors and not already
// references. A result is offered only when its reference (with a storage
// key of up to about 150 bytes and the configured preview) would be
// smaller than the result, so offloading never grows the conversation.
func PlanOffloadWith(c conversation.Conversation, count tokens.Counter, opts OffloadOptions) []OffloadCandidate {
	idx := indexTools(c)
	mask := closePairs(c, idx, opts.Protected)
	var out []OffloadCandidate
	for i, m := range c.Messages {
		if mask[i] {
			continue
		}
		for j, b := range m.Blocks {
			if b.Kind != conversation.KindToolResult || (b.IsError && !opts.IncludeErrors) {
				continue
			}
			if _, isRef := ParseReference(b.Text); isRef {
				continue
			}
			n := count.Count(b.Text)
			if n <= opts.MinTokens {
				continue
			}
			name := idx.toolName(conversation.Pos{Msg: i, Block: j})
			ref := Reference(OffloadRef{Key: planningKey, ToolName: name, TokensSaved: n, Preview: PreviewN(b.Text, opts.PreviewLines, opts.PreviewChars)})
			if n <= count.Count(ref) {
				continue
			}
			out = append(out, OffloadCandidate{Msg: i, Block: j, ToolID: b.ToolID, ToolName: name, Tokens: n})
		}
	}
	return out
}

// OffloadRef is what a reference block says about an offloaded result.
type OffloadRef struct {
	// Key is the storage key (the three-tier reference block's path).
	Key string
	// ToolName names the tool in the heading.
	ToolName string
	// TokensSaved is the offloaded result's size (the three-tier
	// reference block reports the whole result's estimate).
	TokensSaved int
	// Preview is the start of the result (see Preview).
	Preview string
}

// Preview returns the first PreviewMaxLines lines of text, cut to at most
// PreviewMaxChars characters (the tier-1 offload preview).
func Preview(text string) string {
	return PreviewN(text, PreviewMaxLines, PreviewMaxChars)
}

// PreviewN returns the first maxLines lines of text, cut to at most
// maxChars characters on a character boundary; a limit of 0 or less means
// the default. When the rest of the text reports errors (an exception's
// last line, a test runner's failures), the last errorTailLines of them
// follow under ErrorTailMarker: a traceback ends a result, past any
// first lines, and the three-tier design's check asks that the preview
// capture what is essential. PreviewN(PreviewN(s, l, c), l, c) equals
// PreviewN(s, l, c).
func PreviewN(text string, maxLines, maxChars int) string {
	if maxLines <= 0 {
		maxLines = PreviewMaxLines
	}
	if maxChars <= 0 {
		maxChars = PreviewMaxChars
	}
	if head, tail, ok := strings.Cut(text, "\n"+ErrorTailMarker+"\n"); ok {
		// A preview already: its error lines stay as they are.
		return headPreview(head, maxLines, maxChars) + "\n" + ErrorTailMarker + "\n" + tail
	}
	p := headPreview(text, maxLines, maxChars)
	if errs := errorTail(text[len(p):], p); len(errs) > 0 {
		p += "\n" + ErrorTailMarker + "\n" + strings.Join(errs, "\n")
	}
	return p
}

// headPreview is the first maxLines lines of text, cut to maxChars
// characters.
func headPreview(text string, maxLines, maxChars int) string {
	lines := strings.SplitN(text, "\n", maxLines+1)
	if len(lines) > maxLines {
		lines = lines[:maxLines]
	}
	p := strings.Join(lines, "\n")
	n := 0
	for i := range p {
		if n == maxChars {
			return p[:i]
		}
		n++
	}
	return p
}

// ErrorTailMarker opens the error lines a preview adds after its first
// lines (PreviewN).
const ErrorTailMarker = "[… the result's last error lines:]"

// errorTailLines and errorTailRunes bound the error lines a preview adds.
const (
	errorTailLines = 5
	errorTailRunes = 200
)

// reErrorLine is a line that reports a failure: an exception with its
// message (a traceback's last line), a test runner's ERROR/FAIL lines,
// pytest's "E   …", a tool's "error:"/"fatal:"/"panic:".
var reErrorLine = regexp.MustCompile(`^[A-Za-z_][\w.]*(Error|Exception|Failure)(:|$)|^(ERROR|FAIL|FAILED)\b|^E\s{2,}\S|(?i)^(error|fatal|panic)(\[[^\]]*\])?:`)

// errorTail is the last errorTailLines distinct error lines of rest that
// shown does not hold, oldest first, each cut to errorTailRunes.
func errorTail(rest, shown string) []string {
	var out []string
	seen := map[string]bool{}
	lines := strings.Split(rest, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < errorTailLines; i-- {
		l := strings.TrimSpace(lines[i])
		if len(l) < 8 || !reErrorLine.MatchString(l) || l == ErrorTailMarker {
			continue
		}
		if r := []rune(l); len(r) > errorTailRunes {
			l = string(r[:errorTailRunes]) + "…"
		}
		if seen[l] || strings.Contains(shown, l) {
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	slices.Reverse(out)
	return out
}

// Reference renders the three-tier reference block for an offloaded
// result, telling the agent how to recover it (the RecoverTool and the
// offload's id), ending with offload-compact's "Tool result is at: KEY" line, which
// ParseReference reads back. The preview is used as given: cut it with
// Preview or PreviewN first.
func Reference(r OffloadRef) string {
	name := r.ToolName
	if name == "" {
		name = "tool"
	}
	var sb strings.Builder
	sb.WriteString(refHeadingPrefix + name + " Result\n")
	id := referenceID(r.Key)
	sb.WriteString("**Id:** " + id + "\n")
	sb.WriteString("**Tokens Saved:** " + strconv.Itoa(r.TokensSaved) + "\n")
	sb.WriteString("**Preview:**\n")
	for _, line := range strings.Split(r.Preview, "\n") {
		sb.WriteString(strings.TrimRight("> "+line, " ") + "\n")
	}
	sb.WriteString("\n*Recover the full content with the " + RecoverTool + " tool, id: " + id + "*\n")
	sb.WriteString(refPointerPrefix + id)
	return sb.String()
}

// RecoverTool is the tool an agent calls to read an offloaded result back
// (the HTTP API's GET /v1/tools defines it); references name it and the
// offload's id instead of a path the agent cannot read.
const RecoverTool = "recover_context"

// referenceID is the id a reference gives for its key: the key's last
// segment, the content's SHA-256 for a content key (the offload's id,
// which GET /v1/sessions/{session}/offloads/{id} and the RecoverTool
// read).
func referenceID(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// ParseReference returns the offload id of a reference: text whose last
// line is "Tool result is at: ID", either as the whole text
// (offload-compact's form) or at the end of a block that starts with
// "## Offloaded: " (the three-tier reference block, as Reference writes
// it). Other text that merely quotes the pointer line is not a reference.
// The id is the caller's text: it is a pointer only once the store says
// it is an offload of the session.
func ParseReference(text string) (id string, ok bool) {
	text = strings.TrimRight(text, " \t\r\n")
	last := text
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		last = text[i+1:]
		if !strings.HasPrefix(text, refHeadingPrefix) {
			return "", false
		}
	}
	if !strings.HasPrefix(last, refPointerPrefix) {
		return "", false
	}
	id = strings.TrimSpace(strings.TrimPrefix(last, refPointerPrefix))
	if id == "" {
		return "", false
	}
	return id, true
}

// Placed is a candidate whose full text has been stored under Key.
type Placed struct {
	OffloadCandidate
	// Key is where the full result now lives.
	Key string
	// Preview is the preview to show (see the Preview function).
	Preview string
}

// ApplyOffload replaces each placed result's text with its reference. It
// fails, leaving nothing half-done, when a placement does not point at a
// tool_result with the planned call id, is given twice, or has a key that
// is empty, multi-line or longer than MaxKeyLen.
func ApplyOffload(c conversation.Conversation, placed []Placed) (conversation.Conversation, error) {
	out := c.Clone()
	seen := map[[2]int]bool{}
	for k, p := range placed {
		b, err := resultBlock(out, p.Msg, p.Block)
		if err != nil {
			return conversation.Conversation{}, fmt.Errorf("offload placement %d: %w", k, err)
		}
		if b.ToolID != p.ToolID {
			return conversation.Conversation{}, fmt.Errorf("offload placement %d: message %d block %d answers call %q, plan says %q", k, p.Msg, p.Block, b.ToolID, p.ToolID)
		}
		if err := checkKey(p.Key); err != nil {
			return conversation.Conversation{}, fmt.Errorf("offload placement %d: %w", k, err)
		}
		at := [2]int{p.Msg, p.Block}
		if seen[at] {
			return conversation.Conversation{}, fmt.Errorf("offload placement %d: message %d block %d placed twice", k, p.Msg, p.Block)
		}
		seen[at] = true
		b.ReplaceResult(Reference(OffloadRef{Key: p.Key, ToolName: p.ToolName, TokensSaved: p.Tokens, Preview: p.Preview}))
	}
	return out, nil
}

// ErrNotReference is what a Restore fetch returns for an id that is not a
// recorded offload of the conversation's session: the block keeps its text.
var ErrNotReference = errors.New("not a recorded offload")

// References lists the offload ids of the references in tool results of messages
// where pick is true, in conversation order.
func References(c conversation.Conversation, pick func(msg int) bool) []string {
	var ids []string
	for i, m := range c.Messages {
		if !pick(i) {
			continue
		}
		for _, b := range m.Blocks {
			if b.Kind != conversation.KindToolResult {
				continue
			}
			if id, ok := ParseReference(b.Text); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// RestoreStats lists the offload ids Restore handled, in conversation order.
type RestoreStats struct {
	// Restored ids were fetched and put back.
	Restored []string
	// Unavailable ids could not be fetched; their results now read
	// "[Content unavailable: ID]" (offload-compact).
	Unavailable []string
}

// Restore puts offloaded results back before summarization (offload-compact):
// every reference in a tool result of a non-protected message is replaced
// by fetch(id), or by "[Content unavailable: ID]" when fetch fails.
// Protected messages keep their references, as offload-compact's kept messages do.
func Restore(c conversation.Conversation, fetch func(id string) (string, error), protected []bool) (conversation.Conversation, RestoreStats, error) {
	if fetch == nil {
		return conversation.Conversation{}, RestoreStats{}, fmt.Errorf("restore offloaded results: fetch is nil")
	}
	if err := checkMask(c, protected); err != nil {
		return conversation.Conversation{}, RestoreStats{}, fmt.Errorf("restore offloaded results: %w", err)
	}
	out := c.Clone()
	var stats RestoreStats
	for i := range out.Messages {
		if isProtected(protected, i) {
			continue
		}
		for j := range out.Messages[i].Blocks {
			b := &out.Messages[i].Blocks[j]
			if b.Kind != conversation.KindToolResult {
				continue
			}
			id, ok := ParseReference(b.Text)
			if !ok {
				continue
			}
			text, err := fetch(id)
			if errors.Is(err, ErrNotReference) {
				// Text that only looks like a reference stays as it is.
				continue
			}
			if err != nil {
				b.ReplaceResult("[Content unavailable: " + id + "]")
				stats.Unavailable = append(stats.Unavailable, id)
				continue
			}
			b.ReplaceResult(text)
			stats.Restored = append(stats.Restored, id)
		}
	}
	return out, stats, nil
}

// resultBlock returns a pointer to the tool_result block at (msg, block).
func resultBlock(c conversation.Conversation, msg, block int) (*conversation.Block, error) {
	if msg < 0 || msg >= len(c.Messages) {
		return nil, fmt.Errorf("message %d out of range (conversation has %d)", msg, len(c.Messages))
	}
	m := c.Messages[msg]
	if block < 0 || block >= len(m.Blocks) {
		return nil, fmt.Errorf("block %d out of range (message %d has %d)", block, msg, len(m.Blocks))
	}
	b := &m.Blocks[block]
	if b.Kind != conversation.KindToolResult {
		return nil, fmt.Errorf("message %d block %d is %s, not %s", msg, block, b.Kind, conversation.KindToolResult)
	}
	return b, nil
}

// checkKey validates a storage key before it goes into a reference.
func checkKey(key string) error {
	switch {
	case strings.TrimSpace(key) == "":
		return fmt.Errorf("storage key is empty")
	case strings.ContainsAny(key, "\r\n"):
		return fmt.Errorf("storage key %q spans lines", key)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("storage key is %d bytes, limit %d", len(key), MaxKeyLen)
	case key != strings.TrimSpace(key):
		return fmt.Errorf("storage key %q has surrounding spaces", key)
	case strings.TrimSpace(referenceID(key)) != referenceID(key) || referenceID(key) == "":
		return fmt.Errorf("storage key %q has no id (its last segment)", key)
	}
	return nil
}
