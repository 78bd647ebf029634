package recoverid

import (
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Map places the messages and blocks of a working conversation in the
// archived original it was made from, so that a cut of the working copy
// names what it took out by positions in the original.
//
// The passes change a working conversation in a few ways only, and Align
// follows each:
//
//   - offload, post-processing, map-reduce, truncation (inputs or results)
//     replace the text of a tool result or the input of a call in place:
//     message and block positions are kept, and blocks are matched by
//     kind and call id, whatever their text;
//   - watermark pruning removes tool calls and results and drops the
//     messages it empties: an original block missing from the working
//     copy is skipped when it is a call or a result (text never is);
//   - a save merges same-role neighbours of an Anthropic conversation: a
//     working message may be several consecutive originals of its role;
//   - a history summary drops messages and inserts its own, which names
//     the range it replaced with its id: that range is where it stands.
//
// Text blocks must be equal to match, so a working message matches only
// an original holding its words. A message that matches nothing (none
// should) stands for the whole original: what an id names is then more
// than what was cut, never less.
type Map struct {
	archive string
	n       int
	// msgs is, per working message, the range of originals it stands
	// for (lo -1: unknown).
	msgs [][2]int
	// blocks is, per working block, its original (message, block), or
	// (-1, -1).
	blocks [][][2]int
}

// Align maps work onto orig, the parse of the archive whose SHA-256 is
// archive.
func Align(orig, work conversation.Conversation, archive string) Map {
	m := Map{archive: archive, n: len(orig.Messages), msgs: make([][2]int, len(work.Messages)),
		blocks: make([][][2]int, len(work.Messages))}
	cursor := 0
	for wi, w := range work.Messages {
		m.blocks[wi] = unknownBlocks(len(w.Blocks))
		lo, hi, known := m.n, -1, true
		// A save may have merged a summary with same-role neighbours: the
		// summary's block stands for the range its id names, and the
		// blocks around it are matched on their own.
		for _, seg := range segments(w, archive, m.n) {
			if seg.summary {
				lo, hi = min(lo, seg.lo), max(hi, seg.hi)
				continue
			}
			part := conversation.Message{Role: w.Role, Blocks: w.Blocks[seg.from:seg.to]}
			first, last, pos, ok := matchFrom(orig.Messages, cursor, part)
			if !ok {
				known = false
				continue
			}
			copy(m.blocks[wi][seg.from:seg.to], pos)
			lo, hi = min(lo, first), max(hi, last)
			cursor = last + 1
		}
		if !known || hi < 0 {
			lo, hi = -1, -1
		}
		m.msgs[wi] = [2]int{lo, hi}
	}
	return m
}

// segment is a run of blocks of a working message: a summary block, with
// the range it names, or blocks to match against the original.
type segment struct {
	from, to int
	summary  bool
	lo, hi   int
}

// segments cuts w at its summary blocks. A message without blocks is one
// empty segment, matched like any other.
func segments(w conversation.Message, archive string, n int) []segment {
	var out []segment
	start := 0
	for i, b := range w.Blocks {
		lo, hi, ok := summarySpan(b, archive, n)
		if !ok {
			continue
		}
		if i > start {
			out = append(out, segment{from: start, to: i})
		}
		out = append(out, segment{from: i, to: i + 1, summary: true, lo: lo, hi: hi})
		start = i + 1
	}
	if start < len(w.Blocks) || len(w.Blocks) == 0 {
		out = append(out, segment{from: start, to: len(w.Blocks)})
	}
	return out
}

func unknownBlocks(n int) [][2]int {
	out := make([][2]int, n)
	for i := range out {
		out[i] = [2]int{-1, -1}
	}
	return out
}

// Archive is the SHA-256 of the original the map places messages in.
func (m Map) Archive() string { return m.archive }

// Range is the id of the originals the working messages msgs stand for:
// from the first to the last of them. ok is false when the original has
// no message.
func (m Map) Range(msgs []int) (ID, bool) {
	if m.n == 0 || len(msgs) == 0 {
		return ID{}, false
	}
	lo, hi := m.n, -1
	for _, i := range msgs {
		if i < 0 || i >= len(m.msgs) || m.msgs[i][0] < 0 {
			return Range(m.archive, 0, m.n-1), true // unknown: all of it
		}
		lo, hi = min(lo, m.msgs[i][0]), max(hi, m.msgs[i][1])
	}
	return Range(m.archive, lo, hi), true
}

// Block is the id of the original of block k of working message msg: the
// block itself when it was matched, else the range its message stands
// for.
func (m Map) Block(msg, k int) (ID, bool) {
	if msg >= 0 && msg < len(m.blocks) && k >= 0 && k < len(m.blocks[msg]) && m.blocks[msg][k][0] >= 0 {
		at := m.blocks[msg][k]
		return BlockOf(m.archive, at[0], at[1]), true
	}
	return m.Range([]int{msg})
}

// matchFrom finds the first original at or after cursor that w was made
// from (see matchAt).
func matchFrom(orig []conversation.Message, cursor int, w conversation.Message) (lo, hi int, pos [][2]int, ok bool) {
	for o := max(cursor, 0); o < len(orig); o++ {
		if orig[o].Role != w.Role {
			continue
		}
		if hi, pos, ok := matchAt(orig, o, w); ok {
			return o, hi, pos, true
		}
	}
	return 0, 0, nil, false
}

// matchAt reports whether w was made from orig[o] (and, for a merged
// message, the same-role originals after it, up to hi): every block of w
// matches an original block in order, and the original blocks it skips
// are calls and results (pruned), never text.
func matchAt(orig []conversation.Message, o int, w conversation.Message) (hi int, pos [][2]int, ok bool) {
	pos = make([][2]int, len(w.Blocks))
	k, j := o, 0
	for bi, b := range w.Blocks {
		for {
			if j >= len(orig[k].Blocks) {
				if k+1 < len(orig) && orig[k+1].Role == w.Role {
					k, j = k+1, 0
					continue
				}
				return 0, nil, false
			}
			ob := orig[k].Blocks[j]
			if sameBlock(ob, b) {
				pos[bi] = [2]int{k, j}
				j++
				break
			}
			if !prunable(ob) {
				return 0, nil, false
			}
			j++
		}
	}
	for ; j < len(orig[k].Blocks); j++ {
		if !prunable(orig[k].Blocks[j]) {
			return 0, nil, false
		}
	}
	return k, pos, true
}

// prunable reports whether a pass may remove the block (watermark
// pruning removes calls and results).
func prunable(b conversation.Block) bool {
	return b.Kind == conversation.KindToolUse || b.Kind == conversation.KindToolResult
}

// sameBlock reports whether working block w is original block o, its
// text or input possibly replaced by a pass.
func sameBlock(o, w conversation.Block) bool {
	if o.Kind != w.Kind {
		return false
	}
	switch o.Kind {
	case conversation.KindText, conversation.KindThinking:
		return o.Text == w.Text
	case conversation.KindToolUse:
		return o.ToolID == w.ToolID && o.ToolName == w.ToolName
	case conversation.KindToolResult:
		return o.ToolID == w.ToolID
	}
	return true
}

// summarySpan is the range a summary replaced, read from the range ids
// of this archive in a text block: only a summary this run wrote names
// its own archive (the archive cannot hold its own digest).
func summarySpan(b conversation.Block, archive string, n int) (lo, hi int, ok bool) {
	if archive == "" || b.Kind != conversation.KindText {
		return 0, 0, false
	}
	lo, hi = n, -1
	text := b.Text
	for {
		i := strings.Index(text, archive+".m")
		if i < 0 {
			break
		}
		text = text[i:]
		end := len(archive) + 2
		for end < len(text) && (text[end] >= '0' && text[end] <= '9' || text[end] == '-' || text[end] == 'b') {
			end++
		}
		if id, err := Parse(text[:end]); err == nil && !id.IsBlock() && id.To < n {
			lo, hi = min(lo, id.From), max(hi, id.To)
		}
		text = text[end:]
	}
	return lo, hi, hi >= 0
}
