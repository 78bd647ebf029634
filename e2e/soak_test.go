//go:build linux

package e2e

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxcompact/orchestrator/internal/testkit/soak"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestChaosSoakShort is the CI version of `make soak` (internal/testkit/soak):
// the production topology as separate processes (the Temporal server,
// versitygw, two workers, two API replicas, a fresh database), Toxiproxy
// on every link, 90 events from three tenants posted over HTTP while
// components are SIGKILLed, links slowed, throttled, reset and
// partitioned, Postgres cut off for 30 s and the workers replaced by a
// rolling deploy; then every check of the soak must hold. About three
// minutes on two cores.
func TestChaosSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes minutes")
	}
	t.Parallel()
	admin, err := url.Parse(storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	admin.Path = "/postgres"
	q := admin.Query()
	q.Del("search_path")
	admin.RawQuery = q.Encode()

	var log lockedBuilder
	cfg := soak.Config{
		Events: 90, Sessions: 9, Tenants: 3, Workers: 2,
		Duration: 80 * time.Second, FaultRate: 1, Settle: 2 * time.Minute, Concurrency: 4,
		Dir: t.TempDir(), PostgresURL: admin.String(), DataDir: dataDir,
		Bins: soak.Bins{Worker: buildCommand(t, "worker"), Starter: buildCommand(t, "starter"), Dev: buildCommand(t, "cmd/dev")},
		Log:  &log,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, log.String())
	}
	var table strings.Builder
	rep.Table(&table)
	t.Log("\n" + table.String())
	if len(rep.Failures) > 0 {
		t.Errorf("the soak's checks failed; its log:\n%s", log.String())
	}
	if rep.Accepted < cfg.Events*9/10 {
		t.Errorf("only %d of %d events accepted", rep.Accepted, cfg.Events)
	}
	if rep.Faults["partition"]+rep.Faults["latency"]+rep.Faults["reset"]+rep.Faults["bandwidth"] == 0 || rep.Faults["rolling deploy"] != 1 {
		t.Errorf("faults injected: %v", rep.Faults)
	}
}

// lockedBuilder is a strings.Builder the soak's goroutines can log to.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
