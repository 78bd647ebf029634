package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/probe"
)

// testDataDir holds the real agent conversations copied into the
// repository (testdata/conversations/README.md gives their provenance): all
// SWE-agent runs and the first 20 tau-bench trajectories. The bench itself
// reads the full ../shared/data (-data).
const testDataDir = "../../testdata/conversations"

func pgMessage(typ byte, body string) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

func pgUntyped(code uint32, body string) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, uint32(8+len(body)))
	binary.BigEndian.PutUint32(b[4:], code)
	return append(b, body...)
}

func TestCountFrontendCountsSyncAndQuery(t *testing.T) {
	t.Parallel()
	startup := pgUntyped(196608, "user\x00postgres\x00\x00")
	extended := bytes.Join([][]byte{
		pgMessage('P', "\x00select 1\x00\x00\x00"), pgMessage('B', "\x00\x00\x00\x00\x00\x00\x00\x00"),
		pgMessage('D', "P\x00"), pgMessage('E', "\x00\x00\x00\x00\x00"), pgMessage('S', ""),
	}, nil)
	tests := []struct {
		name   string
		stream []byte
		want   int
	}{
		{"startup only", startup, 0},
		{"one extended query", append(append([]byte{}, startup...), extended...), 1},
		{"a pipelined batch is one round trip", bytes.Join([][]byte{startup, extended[:len(extended)-5], extended}, nil), 1},
		{"simple query and terminate", bytes.Join([][]byte{startup, pgMessage('Q', "select 1\x00"), pgMessage('X', "")}, nil), 1},
		{"ssl request first", bytes.Join([][]byte{pgUntyped(pgSSLRequest, ""), startup, extended, extended}, nil), 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			n := 0
			err := countFrontend(bytes.NewReader(tc.stream), &out, func(string) { n++ })
			require.NoError(t, err)
			require.Equal(t, tc.want, n)
			require.Equal(t, tc.stream, out.Bytes(), "every byte is forwarded unchanged")
		})
	}
}

func TestCountFrontendRejectsBrokenLength(t *testing.T) {
	t.Parallel()
	stream := append(pgUntyped(196608, ""), 'Q', 0, 0, 0, 2)
	err := countFrontend(bytes.NewReader(stream), &bytes.Buffer{}, func(string) {})
	require.ErrorContains(t, err, "length 2")
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	tests := []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {10, 1}, {0, 1}, {100, 10}}
	for _, tc := range tests {
		require.Equal(t, tc.want, percentile(ds, tc.p), "p%.0f", tc.p)
	}
	require.Zero(t, percentile(nil, 50))
	require.Equal(t, 2.0, percentileF([]float64{3, 1, 2}, 50))
}

func TestOverlap(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name   string
		a0, a1 int
		want   time.Duration
	}{
		{"inside", 12, 15, 3 * time.Second},
		{"before", 0, 5, 0},
		{"after", 25, 30, 0},
		{"over the start", 5, 15, 5 * time.Second},
		{"over the whole window", 0, 40, 10 * time.Second},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, overlap(at(tc.a0), at(tc.a1), at(10), at(20)), tc.name)
	}
}

func TestCallLogBusyCountsOverlapsOnce(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	l := &callLog{byRun: map[string][]interval{}}
	// Two parallel calls, then one after a gap: 500 + 500 ms busy.
	l.add("r", interval{at(0), at(500)})
	l.add("r", interval{at(100), at(400)})
	l.add("r", interval{at(1000), at(1500)})
	l.add("other", interval{at(0), at(9000)})
	busy, n := l.busy("r")
	require.Equal(t, time.Second, busy)
	require.Equal(t, 3, n)
	busy, n = l.busy("none")
	require.Zero(t, busy)
	require.Zero(t, n)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stack []string
		want  string
	}{
		{[]string{"runtime.mallocgc", "github.com/ctxcompact/orchestrator/internal/tokens.Conversation", "github.com/ctxcompact/orchestrator/internal/plan.Deterministic"}, catTokens},
		{[]string{"strings.Index", "github.com/ctxcompact/orchestrator/internal/plan.Deterministic"}, catDeterministic},
		{[]string{"encoding/json.Marshal", "github.com/ctxcompact/orchestrator/internal/testkit/llmtest.(*Server).handleCompletion"}, catFakeLLM},
		{[]string{"crypto/sha256.block", "github.com/aws/aws-sdk-go-v2/service/s3.(*Client).PutObject", "github.com/ctxcompact/orchestrator/internal/blob.(*Store).put"}, catAWS},
		{[]string{"regexp.(*Regexp).FindAllStringIndex", "github.com/ctxcompact/orchestrator/internal/drift.Matches", "github.com/ctxcompact/orchestrator/activities.(*idCache).get.func1"}, catText},
		{[]string{"strings.ToLower", "github.com/ctxcompact/orchestrator/internal/textcut.KeepLines", "github.com/ctxcompact/orchestrator/internal/offline.Summarizer.Summarize"}, catText},
		{[]string{"runtime.gcBgMarkWorker"}, catRuntime},
		{[]string{"database/sql.(*DB).conn", "go.temporal.io/server/common/persistence.(*x).y"}, catServer},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, classify(tc.stack), "%v", tc.stack)
	}
}

func TestHeapOwner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stack []string
		want  string
	}{
		{[]string{"google.golang.org/protobuf/proto.MarshalOptions.marshal", "go.temporal.io/server/common/persistence/serialization.encodeBlob"}, catServer},
		{[]string{"encoding/json.Marshal", "main.renderChat", "main.sizedChat"}, catHarness},
		{[]string{"bytes.growSlice", "github.com/ctxcompact/orchestrator/internal/conversation.Render"}, "worker"},
		{[]string{"bytes.Clone", "github.com/ctxcompact/orchestrator/internal/blob.(*cache).add", "github.com/ctxcompact/orchestrator/internal/blob.(*Store).PutContent"}, ownerCaches},
		{[]string{"strings.Clone", "github.com/ctxcompact/orchestrator/activities.keepIDs"}, ownerCaches},
		{[]string{"strings.Clone", "github.com/ctxcompact/orchestrator/internal/conversation.Conversation.Detached",
			"github.com/ctxcompact/orchestrator/activities.(*convCache).add"}, ownerCaches},
		{[]string{"crypto/sha256.Sum256", "github.com/ctxcompact/orchestrator/internal/tokens.cachedCounter.Count"}, ownerCaches},
		{[]string{"google.golang.org/grpc/internal/transport.(*http2Server).operateHeaders", "google.golang.org/grpc.(*Server).serveStreams"}, catServer},
		{[]string{"github.com/temporalio/tchannel-go.NewFrame"}, catServer},
		{[]string{"google.golang.org/grpc/internal/transport.(*http2Client).operateHeaders"}, "worker"},
		{[]string{"main.(*callLog).add", "main.(*timedSummarizer).Summarize"}, catHarness},
		{[]string{"github.com/ctxcompact/orchestrator/internal/conversation.Conversation.Clone",
			"github.com/ctxcompact/orchestrator/activities.(*convCache).get"}, "worker"},
		{[]string{"github.com/ctxcompact/orchestrator/internal/conversation.splitObject", "github.com/ctxcompact/orchestrator/internal/conversation.ParseAny",
			"github.com/ctxcompact/orchestrator/internal/gateway.(*Gateway).Submit", "main.(*scenario).compact"}, ownerAPI},
		{[]string{"bytes.growSlice", "encoding/json.(*Decoder).refill", "github.com/ctxcompact/orchestrator/internal/httpapi.decode",
			"net/http.(*conn).serve"}, ownerAPI},
		{[]string{"bytes.Clone", "github.com/ctxcompact/orchestrator/internal/blob.(*cache).add",
			"github.com/ctxcompact/orchestrator/internal/blob.(*Store).PutContentVerified", "github.com/ctxcompact/orchestrator/internal/gateway.(*Gateway).Submit"}, ownerCaches},
		{[]string{"bytes.NewReader", "main.apiRequest", "main.benchAPI.func1"}, catHarness},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, heapOwner(tc.stack), "%v", tc.stack)
	}
}

// profileSink keeps the profiled allocation alive.
var profileSink [][]byte

//go:noinline
func allocateForProfile() {
	for i := 0; i < 64; i++ {
		profileSink = append(profileSink, make([]byte, 64<<10))
	}
}

func TestParseProfileReadsAHeapProfile(t *testing.T) {
	// Not parallel: it changes the process's profiling rate.
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	allocateForProfile()
	runtime.GC()
	var buf bytes.Buffer
	require.NoError(t, pprof.Lookup("heap").WriteTo(&buf, 0))

	p, err := parseProfile(buf.Bytes())
	require.NoError(t, err)
	vi := p.valueIndex("inuse_space")
	require.GreaterOrEqual(t, vi, 0, "sample types %v", p.sampleTypes)
	var found int64
	for _, s := range p.samples {
		if strings.Contains(strings.Join(s.stack, " "), "allocateForProfile") {
			found += s.values[vi]
		}
	}
	require.GreaterOrEqual(t, found, int64(64*64<<10), "the 4 MB allocated are live in the profile")
	profileSink = nil
}

func TestParseProfileRejectsGarbage(t *testing.T) {
	t.Parallel()
	_, err := parseProfile([]byte("not gzip"))
	require.Error(t, err)
}

func TestDriftScoresTakesFirstAndLastPass(t *testing.T) {
	t.Parallel()
	first, final := driftScores([]store.Drift{
		{Step: "history/drift/0", Pass: 0, Score: 0.4},
		{Step: "large/0/drift/0", Pass: 0, Score: 0.9},
		{Step: "history/drift/1", Pass: 1, Score: 0.7},
	})
	require.Equal(t, []float64{0.4, 0.9}, first)
	require.Equal(t, []float64{0.7, 0.9}, final)
}

// requireData fails the test when the repository's copy of the data is
// missing.
func requireData(t *testing.T) {
	t.Helper()
	for _, rel := range []string{"swe-agent-deepseek", hugeFile, "tau-bench/gpt-4o-airline.json"} {
		if _, err := os.Stat(filepath.Join(testDataDir, rel)); err != nil {
			t.Fatalf("test data %s: %v", filepath.Join(testDataDir, rel), err)
		}
	}
}

func TestSizedChatIsAValidConversationOfTheSize(t *testing.T) {
	t.Parallel()
	requireData(t)
	for _, size := range []int{100 << 10, 1 << 20} {
		data, err := sizedChat(testDataDir, size)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(data), size)
		require.Less(t, len(data), size+size/2+200<<10, "cut soon after the target")
		c, err := conversation.ParseAny(data)
		require.NoError(t, err)
		require.NoError(t, conversation.CheckPairing(c))

		tail, err := withTail(data, "next")
		require.NoError(t, err)
		c2, err := conversation.ParseAny(tail)
		require.NoError(t, err)
		require.Len(t, c2.Messages, len(c.Messages)+1)
		require.Equal(t, conversation.RoleUser, c2.Messages[len(c2.Messages)-1].Role)
	}
}

func TestBuiltConversationsParse(t *testing.T) {
	t.Parallel()
	requireData(t)
	base, err := chatFile(testDataDir, mapReduceBase)
	require.NoError(t, err)
	huge, err := hugeText(testDataDir)
	require.NoError(t, err)
	chat, err := withHugeResult(base, 30, huge[:mapReduceChars])
	require.NoError(t, err)
	react, err := reactFromChat(chat, "q")
	require.NoError(t, err)
	c, err := conversation.ParseAny(react)
	require.NoError(t, err)
	require.Equal(t, conversation.FormatReAct, c.Format)

	wm, err := withCheckpoint(base)
	require.NoError(t, err)
	c, err = conversation.ParseAny(wm)
	require.NoError(t, err)
	require.NoError(t, conversation.CheckPairing(c))
	require.Contains(t, string(wm), "mcp__nisaba__compress_to_checkpoint")

	tau, err := tauChat(testDataDir)
	require.NoError(t, err)
	_, err = conversation.ParseAny(tau)
	require.NoError(t, err)
}

func TestWithTailRejectsOtherShapes(t *testing.T) {
	t.Parallel()
	_, err := withTail([]byte(`{"messages":[],"model":"x"}`), "next")
	require.Error(t, err)
}

func TestObjectKind(t *testing.T) {
	t.Parallel()
	tests := []struct{ path, kind string }{
		{"/bench", "bucket"},
		{"/bench/", "bucket"},
		{"/bench/tenants/acme/work/ab/abcdef", "work"},
		{"/bench/tenants/acme/archive/ab/abcdef", "archive"},
		{"/bench/something/else", "other"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.kind, objectKind(tt.path), tt.path)
	}
}

func TestCPUDiffPerRun(t *testing.T) {
	t.Parallel()
	skeleton := &cpuShares{runs: 10, processCPU: time.Second, s3CPU: 0, pgCPU: 0,
		byCat: map[string]float64{catServer: 0.8, catRuntime: 0.2}}
	pipeline := &cpuShares{runs: 10, processCPU: 2 * time.Second, s3CPU: 300 * time.Millisecond, pgCPU: 100 * time.Millisecond,
		byCat: map[string]float64{catServer: 0.5, catRuntime: 0.25, catProduct: 0.25}}
	require.Equal(t, 100*time.Millisecond, skeleton.perRunTotal())
	require.Equal(t, 240*time.Millisecond, pipeline.perRunTotal())
	require.Equal(t, "+140.0 ms: other product code (activities, gateway, store, blob) +50.0 ms, "+
		"Go runtime (GC, scheduler) and standard library +30.0 ms, S3 server (its own process) +30.0 ms, Temporal server (in-process) +20.0 ms, Postgres backends +10.0 ms",
		cpuDiff(skeleton, pipeline))
}

func TestMergeLoopsAndCPU(t *testing.T) {
	t.Parallel()
	a := loopResult{window: 10 * time.Second, done: 100, total: 120, latencies: []time.Duration{time.Second}}
	b := loopResult{window: 10 * time.Second, done: 60, total: 70, failed: 1, latencies: []time.Duration{2 * time.Second}}
	m := mergeLoops(a, b)
	require.InDelta(t, 8.0, m.rate(), 1e-9, "the mean of 10 and 6 runs/s")
	require.Equal(t, 190, m.total)
	require.Equal(t, 1, m.failed)
	require.Len(t, m.latencies, 2)

	ca := &cpuShares{runs: 10, processCPU: time.Second, byCat: map[string]float64{catServer: 1}}
	cb := &cpuShares{runs: 30, processCPU: 3 * time.Second, s3CPU: 400 * time.Millisecond, byCat: map[string]float64{catServer: 0.5, catProduct: 0.5}}
	cm := mergeCPU(ca, cb)
	require.Equal(t, 40, cm.runs)
	require.InDelta(t, 0.625, cm.byCat[catServer], 1e-9)
	require.InDelta(t, 0.375, cm.byCat[catProduct], 1e-9)
	require.Equal(t, 110*time.Millisecond, cm.perRunTotal(), "4.4 s of CPU over 40 runs")
	require.Nil(t, mergeCPU(ca, nil))
}

// TestProbeJudge: the LLM-judge mode over the real protocol (llmtest):
// the agent is asked the questions without the references, the grader
// gets them, grades are read per category and stored; an unusable grade
// is an error, never a 0; offline there is no judge.
func TestProbeJudge(t *testing.T) {
	t.Parallel()
	var asked, graded string
	srv := llmtest.New(llmtest.WithAnswer(func(system, user string, _ bool) string {
		if strings.Contains(system, "Reference:") {
			graded = system
			if strings.Contains(user, "garbled") {
				return "looks good"
			}
			return "1: 5\n2: 4\n3: 3\n4: 2\n5: 1\n6: 0"
		}
		asked = system
		if strings.Contains(user, "GARBLE") {
			return "garbled"
		}
		return "1. fix it\n2. none\n3. a.py\n4. ls\n5. test\n6. done"
	}))
	t.Cleanup(srv.Close)
	cfg := config.Defaults()
	cfg.OpenAIBaseURL, cfg.LLMTimeout = srv.URL(), 10*time.Second
	j, err := newProbeJudge(cfg)
	require.NoError(t, err)
	require.NotNil(t, j)

	conv := conversation.Conversation{Format: conversation.FormatOpenAI, Messages: []conversation.Message{
		{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "Fix the bug in a.py"}}},
		{Role: conversation.RoleAssistant, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "I will run the tests next."},
			{Kind: conversation.KindToolUse, ToolID: "c1", ToolName: "bash", Input: `{"command":"python -m pytest a.py"}`}}},
		{Role: conversation.RoleTool, Blocks: []conversation.Block{{Kind: conversation.KindToolResult, ToolID: "c1", Text: "E   AssertionError: 1 != 2"}}},
	}}
	set := probe.Derive(conv, nil)
	r, err := j.grade(context.Background(), set, conv)
	require.NoError(t, err)
	require.Equal(t, []int{5, 4, 3, 2, 1, 0}, r.Scores)
	require.Equal(t, 4.5, r.Category[probe.CategoryRecall])
	require.Equal(t, []string{"probe-answer-v1", "probe-grade-v1"}, r.Prompts)
	require.NotContains(t, asked, "Reference:", "the agent never sees the references")
	require.Contains(t, graded, "E   AssertionError: 1 != 2", "the grader does")

	r.Preset = "adaptive"
	j.record(r)
	require.Contains(t, j.summary("adaptive"), "recall 4.5")
	out := filepath.Join(t.TempDir(), "judge.json")
	require.NoError(t, j.write(out))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(data), `"by_category"`)

	conv.Messages[0].Blocks[0].Text = "GARBLE this"
	_, err = j.grade(context.Background(), probe.Derive(conv, nil), conv)
	require.ErrorContains(t, err, "read the grades")

	none, err := newProbeJudge(config.Defaults())
	require.NoError(t, err)
	require.Nil(t, none, "offline: no judge")
}

// peakSink keeps the tracked allocation alive.
var peakSink []byte

//go:noinline
func allocateForPeak() { peakSink = make([]byte, 48<<20) }

// TestPeakTrackerSplitsTheLargestCollection: a live allocation made while
// the tracker runs shows in the split of a collection (the worker's, as
// code of no other owner), and in the peaks.
func TestPeakTrackerSplitsTheLargestCollection(t *testing.T) {
	// Not parallel: it collects garbage and reads the process's profile.
	tr := startPeakTracker(10 * time.Millisecond)
	allocateForPeak()
	// Collections far enough apart for the tracker to see each one end.
	for range 4 {
		runtime.GC()
		time.Sleep(150 * time.Millisecond)
	}
	p := tr.peak()
	peakSink = nil
	require.Positive(t, p.profiled)
	require.GreaterOrEqual(t, p.worker.worker, float64(40<<20), "the 48 MB allocated are the worker's live heap")
	require.GreaterOrEqual(t, p.live, uint64(48<<20))
	require.GreaterOrEqual(t, p.inuse, uint64(48<<20))
}
