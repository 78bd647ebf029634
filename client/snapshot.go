package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Snapshot is one record of a proxy session's state between compactions:
// the host's messages FromMessage..ToMessage (counted from 1), added to
// the snapshot Extends (0: it starts a chain).
type Snapshot struct {
	Seq int64 `json:"seq"`
	// Wire is the host's API: anthropic-messages, openai-chat or
	// openai-responses.
	Wire        string    `json:"wire"`
	FromMessage int       `json:"from_message"`
	ToMessage   int       `json:"to_message"`
	Extends     int64     `json:"extends,omitempty"`
	SHA256      string    `json:"sha256"`
	Bytes       int64     `json:"bytes"`
	CreatedAt   time.Time `json:"created_at"`
}

// SnapshotConversation is a session's conversation as the host sent it
// at a snapshot: its chain's records joined.
type SnapshotConversation struct {
	Seq  int64  `json:"seq"`
	Wire string `json:"wire"`
	// Complete is false when the chain's first records went under
	// retention: Messages then start at FromMessage.
	Complete    bool              `json:"complete"`
	FromMessage int               `json:"from_message"`
	System      json.RawMessage   `json:"system,omitempty"`
	Messages    []json.RawMessage `json:"messages"`
	Records     []int64           `json:"records"`
}

// Snapshots lists a proxy session's snapshots, oldest first.
//
// op: GET /v1/sessions/{session}/snapshots
func (c *Client) Snapshots(ctx context.Context, session string) ([]Snapshot, error) {
	_, data, _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(session)+"/snapshots", nil, nil, true)
	if err != nil {
		return nil, err
	}
	var l struct {
		Snapshots []Snapshot `json:"snapshots"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("decode snapshots: %w", err)
	}
	return l.Snapshots, nil
}

// SnapshotAt reads the conversation the host sent at snapshot seq.
//
// op: GET /v1/sessions/{session}/snapshots/{seq}
func (c *Client) SnapshotAt(ctx context.Context, session string, seq int64) (SnapshotConversation, error) {
	var out SnapshotConversation
	path := "/v1/sessions/" + url.PathEscape(session) + "/snapshots/" + strconv.FormatInt(seq, 10)
	_, data, _, err := c.do(ctx, http.MethodGet, path, nil, nil, true)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("decode snapshot %d: %w", seq, err)
	}
	return out, nil
}
