package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// presets the load spreads its events over (react-two-layer needs a ReAct
// trajectory and gets the ReAct renderings).
var presets = []string{"offload-compact", "three-tier", "watermark", "auto-summarize", "adaptive"}

// sample is one conversation of the load in one format.
type sample struct {
	name   string
	format string
	body   []byte
}

// readSamples reads every conversation under dir and renders each in the
// OpenAI, Anthropic and ReAct formats (a format a conversation cannot be
// written in is skipped), so that the load mixes them.
func readSamples(dir string) ([]sample, error) {
	var out []sample
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		c, err := conversation.ParseAny(data)
		if err != nil {
			return nil // not a conversation (a manifest)
		}
		rel, _ := filepath.Rel(dir, path)
		out = append(out, sample{name: rel, format: string(c.Format), body: data})
		for _, f := range []conversation.Format{conversation.FormatAnthropic, conversation.FormatReAct} {
			if f == c.Format {
				continue
			}
			cc := c
			cc.Format = f
			if r, err := conversation.Render(cc); err == nil {
				if _, err := conversation.Parse(r, f); err == nil {
					out = append(out, sample{name: rel, format: string(f), body: r})
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no conversations under %s", dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name+out[i].format < out[j].name+out[j].format })
	return out, nil
}

// submission is what the client saw of one event: its answer, how many
// attempts it took, and when.
type submission struct {
	tenant, session, eventID string
	runID                    string
	accepted                 bool
	refused                  bool // a 4xx answer (other than 429) ended it
	bad                      bool // sent invalid on purpose: must be refused
	status                   int  // the last answer's status
	attempts                 int
	start, end               time.Time
}

// answer5xx is a 5xx the API gave: allowed only as 503 with Retry-After.
type answer5xx struct {
	status     int
	retryAfter string
	at         time.Time
	body       string
}

// loadGen posts the events and keeps what happened.
type loadGen struct {
	apis    []string
	keys    map[string]string // tenant → API key
	samples []sample
	http    *http.Client

	mu       sync.Mutex
	subs     []*submission
	fivexx   []answer5xx
	retries  int
	answered map[int]int // status → count over all attempts
	netErrs  int
}

// post sends one event until it is accepted or refused, retrying with the
// same event id on 5xx, 429, timeouts and connection errors, as a client
// would; it gives up when ctx ends.
func (g *loadGen) post(ctx context.Context, s *submission, body []byte) {
	s.start = time.Now()
	defer func() { s.end = time.Now() }()
	replica := rand.IntN(len(g.apis))
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		s.attempts++
		if s.attempts > 1 {
			g.mu.Lock()
			g.retries++
			g.mu.Unlock()
		}
		wait := backoff
		status, hdr, data, err := g.once(ctx, g.apis[replica], s, body)
		switch {
		case err != nil:
			g.mu.Lock()
			g.netErrs++
			g.mu.Unlock()
			replica = (replica + 1) % len(g.apis)
		case status == http.StatusOK || status == http.StatusAccepted:
			var a struct {
				RunID string `json:"run_id"`
				Run   struct {
					ID string `json:"id"`
				} `json:"run"`
			}
			_ = json.Unmarshal(data, &a)
			s.runID = a.RunID
			if s.runID == "" {
				s.runID = a.Run.ID
			}
			s.accepted, s.status = true, status
			return
		case status == http.StatusTooManyRequests:
		case status >= 400 && status < 500:
			s.refused, s.status = true, status
			return
		default: // 5xx
			ra := hdr.Get("Retry-After")
			if status != http.StatusServiceUnavailable || ra == "" {
				g.mu.Lock()
				g.fivexx = append(g.fivexx, answer5xx{status: status, retryAfter: ra, at: time.Now(), body: truncate(string(data), 300)})
				g.mu.Unlock()
			}
			var secs int
			if _, err := fmt.Sscan(ra, &secs); err == nil && secs > 0 {
				wait = min(time.Duration(secs)*time.Second, 5*time.Second)
			}
			replica = (replica + 1) % len(g.apis)
		}
		s.status = status
		select {
		case <-ctx.Done():
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait)))):
		}
		backoff = min(backoff*2, 4*time.Second)
	}
}

func (g *loadGen) once(ctx context.Context, api string, s *submission, body []byte) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+"/v1/sessions/"+s.session+"/events", bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.keys[s.tenant])
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	g.mu.Lock()
	g.answered[resp.StatusCode]++
	g.mu.Unlock()
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, data, nil
}

// eventBody is the JSON of event i: its conversation byte for byte
// after the other fields.
func eventBody(eventID, preset string, limit int, conv []byte) []byte {
	head, _ := json.Marshal(map[string]any{"event_id": eventID, "kind": "manual", "model": "gpt-4o", "context_limit": limit, "preset": preset})
	return append(append(append(head[:len(head)-1], `,"conversation":`...), conv...), '}')
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
