package activities_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// memStore is an in-memory activities.RunStore that records what the
// activities asked of it. Its state rules are store.Store's, reduced to
// what the activities rely on: a final run takes no other end, and an
// offload is live until released.
type memStore struct {
	mu         sync.Mutex
	runs       map[string]store.Run
	results    map[string]store.RunResult
	steps      []store.Step
	drifts     []store.Drift
	offloads   []store.Offload
	watermarks map[string]string // by tenant/session
	// seenBy is the watermark each run saw when it started, by run id
	// (what a replay of it prunes against).
	seenBy map[string]string
	// webhooks are the tenants with a live webhook endpoint.
	webhooks map[string]bool
	// logs are the session logs, by tenant/session.
	logs map[string][]store.LogBlock
	// latest are the sessions' latest outputs, by tenant/session.
	latest map[string]store.Output
}

func newMemStore() *memStore {
	return &memStore{runs: map[string]store.Run{}, results: map[string]store.RunResult{}, watermarks: map[string]string{}, seenBy: map[string]string{},
		webhooks: map[string]bool{}, logs: map[string][]store.LogBlock{}, latest: map[string]store.Output{}}
}

func (m *memStore) SessionLog(_ context.Context, tenant, session string) ([]store.LogBlock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.LogBlock(nil), m.logs[tenant+"/"+session]...), nil
}

// LatestOutput is the session's latest committed output: the last run
// committed with an output key, in commit order (results holds them).
func (m *memStore) LatestOutput(_ context.Context, tenant, session string) (store.Output, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.latest[tenant+"/"+session]; ok {
		return o, nil
	}
	return store.Output{}, store.ErrNotFound
}

var errNoRun = errors.New("memstore: no such run")

func (m *memStore) GetRun(_ context.Context, id string) (store.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, errNoRun)
	}
	return r, nil
}

func (m *memStore) StartRun(_ context.Context, id, tenant, session string, st store.RunStart) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.runs[id]
	if !ok {
		return fmt.Errorf("start run %s: %w", id, errNoRun)
	}
	if cur.Tenant != tenant || cur.Session != session {
		return fmt.Errorf("start run %s: id already used by session %q/%q", id, cur.Tenant, cur.Session)
	}
	if cur.Status.Final() {
		return fmt.Errorf("start run %s: status %s: %w", id, cur.Status, store.ErrRunFinal)
	}
	cur.Status, cur.Preset, cur.Model, cur.Level = store.RunRunning, st.Preset, st.Model, st.Level
	cur.TokensBefore, cur.CharsBefore = st.TokensBefore, st.CharsBefore
	if cur.ArchiveKey == "" {
		cur.ArchiveKey, cur.ArchiveSHA256 = st.ArchiveKey, st.ArchiveSHA256
	}
	m.runs[id] = cur
	return nil
}

func (m *memStore) CommitRun(_ context.Context, id string, res store.RunResult) (store.Commit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return store.Commit{}, fmt.Errorf("commit run %s: %w", id, errNoRun)
	}
	m.addSteps(res.Steps)
	c := store.Commit{Webhooks: m.webhooks[r.Tenant]}
	if r.Status.Final() {
		return c, nil
	}
	r.Status = store.RunSucceeded
	if res.OverLimit {
		r.Status, r.Error = store.RunOverLimit, res.OverLimitReason
	}
	r.TokensAfter, r.Ratio, r.OutputKey, r.OutputSHA256 = res.TokensAfter, res.Ratio, res.OutputKey, res.OutputSHA256
	r.Stats, r.Level = res.Stats, res.Level
	m.runs[id], m.results[id] = r, res
	if r.ReplayOf == "" && res.OutputKey != "" {
		m.latest[r.Tenant+"/"+r.Session] = store.Output{RunID: id, Key: res.OutputKey, SHA256: res.OutputSHA256}
	}
	for _, l := range res.Log {
		l.RunID = id
		m.logs[r.Tenant+"/"+r.Session] = append(m.logs[r.Tenant+"/"+r.Session], l)
	}
	c.Committed = true
	return c, nil
}

func (m *memStore) FailRun(_ context.Context, id string, f store.Failure, steps ...store.Step) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return false, fmt.Errorf("fail run %s: %w", id, errNoRun)
	}
	m.addSteps(steps)
	if r.Status.Final() {
		return false, nil
	}
	r.Status, r.Error, r.ErrorClass = store.RunFailed, f.Message, f.Class
	m.runs[id] = r
	return true, nil
}

func (m *memStore) RecordStep(_ context.Context, steps ...store.Step) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addSteps(steps)
	return nil
}

// addSteps appends step records; like store.Store, a record of an
// execution already written (a retried write) adds nothing.
func (m *memStore) addSteps(steps []store.Step) {
	for _, st := range steps {
		if !slices.ContainsFunc(m.steps, func(x store.Step) bool {
			return x.RunID == st.RunID && x.Name == st.Name && x.Attempt == st.Attempt && x.Execution == st.Execution
		}) {
			m.steps = append(m.steps, st)
		}
	}
}

func (m *memStore) RecordDrift(_ context.Context, verdicts ...store.Drift) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drifts = append(m.drifts, verdicts...)
	return nil
}

func (m *memStore) GetWatermark(_ context.Context, tenant, session string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.watermarks[tenant+"/"+session], nil
}

func (m *memStore) WatermarkSeenBy(_ context.Context, _, _, runID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seenBy[runID], nil
}

func (m *memStore) SetWatermark(_ context.Context, tenant, session, toolUseID, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watermarks[tenant+"/"+session] = toolUseID
	return nil
}

func (m *memStore) AddOffload(_ context.Context, o store.Offload) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.offloads {
		if x.Tenant == o.Tenant && x.Session == o.Session && x.Key == o.Key && x.DeletedAt.IsZero() {
			return nil
		}
	}
	m.offloads = append(m.offloads, o)
	return nil
}

func (m *memStore) ListOffloads(_ context.Context, tenant, session string, includeDeleted bool) ([]store.Offload, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Offload
	for _, o := range m.offloads {
		if o.Tenant == tenant && o.Session == session && (includeDeleted || o.DeletedAt.IsZero()) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (m *memStore) LiveOffloads(ctx context.Context, tenant, session string, keys []string) (map[string]bool, error) {
	offs, _ := m.ListOffloads(ctx, tenant, session, false)
	live := map[string]bool{}
	for _, o := range offs {
		if slices.Contains(keys, o.Key) {
			live[o.Key] = true
		}
	}
	return live, nil
}

// ReleaseOffloads marks the session's live offloads of keys deleted and
// deletes each object no other live offload of the tenant refers to.
func (m *memStore) ReleaseOffloads(ctx context.Context, tenant, session string, keys []string,
	del func(ctx context.Context, key string) error) (int, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	marked, deleted := 0, []string(nil)
	for i, o := range m.offloads {
		if o.Tenant == tenant && o.Session == session && o.DeletedAt.IsZero() && slices.Contains(keys, o.Key) {
			m.offloads[i].DeletedAt = m.offloads[i].CreatedAt.AddDate(0, 0, 1)
			marked++
		}
	}
	for _, k := range keys {
		if m.liveInTenant(tenant, k) {
			continue
		}
		if err := del(ctx, k); err != nil {
			return 0, nil, err
		}
		deleted = append(deleted, k)
	}
	return marked, deleted, nil
}

func (m *memStore) liveInTenant(tenant, key string) bool {
	for _, o := range m.offloads {
		if o.Tenant == tenant && o.Key == key && o.DeletedAt.IsZero() {
			return true
		}
	}
	return false
}

// stepNames are the names of the step records written, in order.
func (m *memStore) stepNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for _, st := range m.steps {
		names = append(names, st.Name)
	}
	return names
}
