package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memSnapshots is Snapshots in memory; fail, when set, refuses the next
// records.
type memSnapshots struct {
	mu   sync.Mutex
	recs []Snapshot
	fail bool
}

func (m *memSnapshots) Record(_ context.Context, s Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New("postgres: connection refused")
	}
	if s.Base != "" {
		found := false
		for _, r := range m.recs {
			found = found || (r.Tenant == s.Tenant && r.Session == s.Session && r.Digest == s.Base && r.To == s.From-1)
		}
		if !found {
			return ErrSnapshotBase
		}
	}
	m.recs = append(m.recs, s)
	return nil
}

// erase drops the session's records, as its erasure does.
func (m *memSnapshots) erase(session string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.recs[:0]
	for _, r := range m.recs {
		if r.Session != session {
			kept = append(kept, r)
		}
	}
	m.recs = kept
}

func (m *memSnapshots) Latest(_ context.Context, tenant, session string) (int, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.recs) - 1; i >= 0; i-- {
		if r := m.recs[i]; r.Tenant == tenant && r.Session == session {
			return r.To, r.Digest, nil
		}
	}
	return 0, "", nil
}

func (m *memSnapshots) records() []Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Snapshot(nil), m.recs...)
}

func (m *memSnapshots) setFail(fail bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = fail
}

// waitRecords waits for n records of the session.
func (m *memSnapshots) waitRecords(t *testing.T, session string, n int) []Snapshot {
	t.Helper()
	var got []Snapshot
	require.Eventually(t, func() bool {
		got = got[:0]
		for _, r := range m.records() {
			if r.Session == session {
				got = append(got, r)
			}
		}
		return len(got) >= n
	}, 5*time.Second, 5*time.Millisecond)
	require.Len(t, got, n)
	return got
}

// snapshotMessages are the messages a record holds.
func snapshotMessages(t *testing.T, s Snapshot) (system string, msgs []string) {
	t.Helper()
	var rec struct {
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(s.Body, &rec))
	for _, m := range rec.Messages {
		msgs = append(msgs, string(m))
	}
	return string(rec.System), msgs
}

// TestSnapshotsRecordWhatIsNewSinceTheLastOne: a session's first request
// is recorded whole; a request that extends it adds only the messages
// after it, chained to it by digest; a rewind starts a new chain; a
// token count and a request that adds nothing record nothing; a record
// that fails is carried by the next one, so that the chain has no gap.
func TestSnapshotsRecordWhatIsNewSinceTheLastOne(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderSession: "snap"}
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(4, false), h)
	recs := tp.snaps.waitRecords(t, "snap", 1)
	system, msgs := snapshotMessages(t, recs[0])
	require.Equal(t, `"You are a coding agent. Task: fix the parser."`, system)
	require.Len(t, msgs, 4)
	require.Equal(t, Snapshot{Tenant: "acme", Session: "snap", Wire: "anthropic-messages", From: 1, To: 4, Digest: recs[0].Digest},
		Snapshot{Tenant: recs[0].Tenant, Session: recs[0].Session, Wire: recs[0].Wire, From: recs[0].From, To: recs[0].To, Digest: recs[0].Digest})

	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(6, false), h)
	recs = tp.snaps.waitRecords(t, "snap", 2)
	system, msgs = snapshotMessages(t, recs[1])
	require.Empty(t, system, "the system prompt is in the chain's first record")
	require.Len(t, msgs, 2)
	require.Contains(t, msgs[0], "Turn 4: ")
	require.Equal(t, [2]int{5, 6}, [2]int{recs[1].From, recs[1].To})
	require.Equal(t, recs[0].Digest, recs[1].Base)

	// Nothing new, and a count: no record.
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(6, false), h)
	tp.post(t, "/proxy/anthropic/v1/messages/count_tokens", anthropicBody(8, false), h)
	// A failed record is carried by the next one.
	tp.snaps.setFail(true)
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(8, false), h)
	require.Eventually(t, func() bool {
		return strings.Contains(metricsText(t, tp), `compactor_proxy_snapshots_total{outcome="failed"} 1`)
	}, 5*time.Second, 5*time.Millisecond)
	tp.snaps.setFail(false)
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	recs = tp.snaps.waitRecords(t, "snap", 3)
	require.Equal(t, [2]int{7, 10}, [2]int{recs[2].From, recs[2].To}, "what the failed record held comes with the next")
	require.Equal(t, recs[1].Digest, recs[2].Base)

	// A rewind (the host's own compaction): a new chain, whole.
	rewound := strings.Replace(anthropicBody(3, false), "Turn 0: ", "Summary of turns 0-9: ", 1)
	tp.post(t, "/proxy/anthropic/v1/messages", rewound, h)
	recs = tp.snaps.waitRecords(t, "snap", 4)
	require.Equal(t, [2]int{1, 3}, [2]int{recs[3].From, recs[3].To})
	require.Empty(t, recs[3].Base)

	// The session is erased while the line still knows its chain: the
	// next request starts a new one, whole, rather than extend a record
	// that is gone.
	tp.snaps.erase("snap")
	tp.post(t, "/proxy/anthropic/v1/messages", strings.Replace(anthropicBody(5, false), "Turn 0: ", "Summary of turns 0-9: ", 1), h)
	recs = tp.snaps.waitRecords(t, "snap", 1)
	require.Equal(t, [2]int{1, 5}, [2]int{recs[0].From, recs[0].To})
	require.Empty(t, recs[0].Base)
}

// metricsText is what the proxy's metrics expose now.
func metricsText(t *testing.T, tp *testProxy) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tp.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}
