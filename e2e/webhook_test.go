package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// receiver is e2e/node/webhook-receiver.mjs: a webhook endpoint that
// verifies every delivery with the Standard Webhooks reference library
// (npm standardwebhooks) and answers as its plan says.
type receiver struct {
	t     *testing.T
	url   string
	stdin io.WriteCloser
	mu    sync.Mutex
	lines []receivedLine
}

// receivedLine is what the receiver saw of one delivery.
type receivedLine struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	RunID    string `json:"run_id"`
	Status   string `json:"status"`
	Verified bool   `json:"verified"`
	Error    string `json:"error"`
	Answered int    `json:"answered"`
}

// startReceiver starts the receiver answering plan's codes in order
// ("500,200"), then 200. It fails the test when node or the npm
// packages are missing: `bash deploy/test-deps.sh` installs them.
func startReceiver(t *testing.T, plan string) *receiver {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed for the webhook receiver: run bash deploy/test-deps.sh")
	_, err = os.Stat(filepath.Join("node", "node_modules", "standardwebhooks"))
	require.NoError(t, err, "e2e/node/node_modules is missing: run bash deploy/test-deps.sh")
	// It serves on one of hookListeners, handed over as its fd 3.
	l := takeHookListener(t)
	f, err := l.File()
	require.NoError(t, err)
	cmd := exec.Command(node, filepath.Join("node", "webhook-receiver.mjs"))
	cmd.Env = append(os.Environ(), "PLAN="+plan, "LISTEN_FD=3")
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	_, _ = f.Close(), l.Close() // the receiver holds the socket now
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	r := &receiver{t: t, stdin: stdin}
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "the receiver printed no port")
	var first struct {
		Port int `json:"port"`
	}
	require.NoError(t, json.Unmarshal(sc.Bytes(), &first))
	r.url = fmt.Sprintf("http://127.0.0.1:%d/hook", first.Port)
	go func() {
		for sc.Scan() {
			var l receivedLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				r.mu.Lock()
				r.lines = append(r.lines, l)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// hookListeners are loopback listeners opened once for the receivers:
// their ports are known before any env is built, so that the envs
// allow-list exactly those ports (WEBHOOK_ALLOW_HOSTS is host:port
// aware, and a bare host would allow only 80 and 443).
var (
	hookListeners = sync.OnceValues(func() ([]*net.TCPListener, error) {
		ls := make([]*net.TCPListener, 32)
		for i := range ls {
			l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				return nil, fmt.Errorf("listen for a webhook receiver: %w", err)
			}
			ls[i] = l
		}
		return ls, nil
	})
	hookTaken atomic.Int32
)

// hookAllowHosts is the allow-list of the receivers' host:ports.
func hookAllowHosts(t *testing.T) []string {
	t.Helper()
	ls, err := hookListeners()
	require.NoError(t, err)
	hosts := make([]string, len(ls))
	for i, l := range ls {
		hosts[i] = l.Addr().String()
	}
	return hosts
}

// takeHookListener is the next unused listener of hookListeners.
func takeHookListener(t *testing.T) *net.TCPListener {
	t.Helper()
	ls, err := hookListeners()
	require.NoError(t, err)
	i := int(hookTaken.Add(1)) - 1
	require.Less(t, i, len(ls), "every webhook receiver port of this process is taken: raise hookListeners' count")
	return ls[i]
}

// setSecret hands the receiver the endpoint's secret.
func (r *receiver) setSecret(secret string) {
	_, err := io.WriteString(r.stdin, secret+"\n")
	require.NoError(r.t, err)
}

func (r *receiver) seen() []receivedLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedLine(nil), r.lines...)
}

// waitSeen waits until the receiver saw n deliveries.
func (r *receiver) waitSeen(n int) []receivedLine {
	r.t.Helper()
	require.Eventually(r.t, func() bool { return len(r.seen()) >= n }, 2*time.Minute, 100*time.Millisecond,
		"the receiver saw %d deliveries, want %d", len(r.seen()), n)
	return r.seen()
}

type apiDelivery struct {
	ID        string `json:"id"`
	RunID     string `json:"run_id"`
	EventType string `json:"event_type"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	Log       []struct {
		Attempt        int    `json:"attempt"`
		Code           int    `json:"code"`
		Error          string `json:"error"`
		ResponsePrefix string `json:"response_prefix"`
	} `json:"log"`
}

// deliveriesWhen polls a run's deliveries until ok says they are done.
func (a *apiEnv) deliveriesWhen(runID string, ok func([]apiDelivery) bool) []apiDelivery {
	a.t.Helper()
	var ds []apiDelivery
	require.Eventually(a.t, func() bool {
		var out struct {
			Deliveries []apiDelivery `json:"deliveries"`
		}
		resp, _ := a.call("GET", "/v1/runs/"+runID+"/deliveries", a.key, nil, &out)
		if resp.StatusCode != http.StatusOK {
			return false
		}
		ds = out.Deliveries
		return ok(ds)
	}, 2*time.Minute, 200*time.Millisecond, "deliveries of run %s: %+v", runID, ds)
	return ds
}

func delivered(ds []apiDelivery) bool { return len(ds) == 1 && ds[0].Status == "delivered" }

// registerWebhook registers r's URL for a's tenant and hands it the
// secret.
func (a *apiEnv) registerWebhook(r *receiver) string {
	a.t.Helper()
	var wh struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	resp, body := a.call("POST", "/v1/webhooks", a.key, []byte(`{"url":"`+r.url+`","description":"e2e receiver"}`), &wh)
	require.Equal(a.t, http.StatusCreated, resp.StatusCode, string(body))
	require.True(a.t, strings.HasPrefix(wh.Secret, "whsec_"))
	r.setSecret(wh.Secret)
	return wh.ID
}

// postRun submits a real conversation and waits for its run.
func (a *apiEnv) postRun(eventID string) string {
	a.t.Helper()
	input := readData(a.t, "swe-agent-deepseek/django__django-11564.json")
	var res struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	resp, body := a.call("POST", "/v1/sessions/s1/events", a.key,
		eventBody(map[string]any{"event_id": eventID, "model": "gpt-4o", "wait_seconds": 60}, input), &res)
	require.Equal(a.t, http.StatusOK, resp.StatusCode, string(body))
	return res.RunID
}

// TestWebhookDeliveredOnceAfterA500: a receiver that answers 500 then 200
// gets the run's final state twice with one webhook-id, every signature
// verified by the Standard Webhooks reference library, and accepts it
// exactly once; the delivery log shows both attempts. A manual
// redelivery keeps the id; another tenant sees nothing; a deleted
// endpoint gets no more deliveries; bad endpoint URLs are 400s naming
// the field.
func TestWebhookDeliveredOnceAfterA500(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	r := startReceiver(t, "500,200")

	for _, bad := range []string{`{"url":"http://hooks.example.com/x"}`, `{"url":"ftp://x"}`, `{}`} {
		var e apiError
		resp, body := a.call("POST", "/v1/webhooks", a.key, []byte(bad), &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
		require.Equal(t, "url", e.Error.Field, string(body))
	}
	hookID := a.registerWebhook(r)
	var list struct {
		Webhooks []map[string]any `json:"webhooks"`
	}
	resp, _ := a.call("GET", "/v1/webhooks", a.key, nil, &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, list.Webhooks, 1)
	require.NotContains(t, list.Webhooks[0], "secret", "a listed endpoint shows no secret")
	resp, _ = a.call("GET", "/v1/webhooks", a.otherKey, nil, &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, list.Webhooks, "another tenant sees none")

	runID := a.postRun("ev-webhook-1")
	ds := a.deliveriesWhen(runID, delivered)
	d := ds[0]
	require.Equal(t, "run.succeeded", d.EventType)
	require.Equal(t, 2, d.Attempts)
	require.Len(t, d.Log, 2)
	require.Equal(t, 500, d.Log[0].Code)
	require.Equal(t, 200, d.Log[1].Code)
	require.Equal(t, "ok", d.Log[1].ResponsePrefix)

	seen := r.waitSeen(2)
	accepted := 0
	for _, l := range seen {
		require.True(t, l.Verified, "the reference library verified the signature: %s", l.Error)
		require.Equal(t, d.ID, l.ID, "one webhook-id across retries")
		require.Equal(t, runID, l.RunID)
		require.Equal(t, "succeeded", l.Status)
		if l.Answered == 200 {
			accepted++
		}
	}
	require.Equal(t, 1, accepted, "the receiver accepted the delivery exactly once")

	resp, _ = a.call("GET", "/v1/runs/"+runID+"/deliveries", a.otherKey, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another tenant's run is not found")
	resp, _ = a.call("POST", "/v1/deliveries/"+d.ID+"/redeliver", a.otherKey, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	// A manual redelivery: the same id again.
	resp, body := a.call("POST", "/v1/deliveries/"+d.ID+"/redeliver", a.key, nil, nil)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	seen = r.waitSeen(3)
	require.Equal(t, d.ID, seen[2].ID)
	require.True(t, seen[2].Verified)
	a.deliveriesWhen(runID, func(ds []apiDelivery) bool { return len(ds) == 1 && ds[0].Attempts == 3 && ds[0].Status == "delivered" })

	// A deleted endpoint gets nothing more.
	resp, _ = a.call("DELETE", "/v1/webhooks/"+hookID, a.otherKey, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another tenant cannot delete it")
	resp, _ = a.call("DELETE", "/v1/webhooks/"+hookID, a.key, nil, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	next := a.postRun("ev-webhook-2")
	time.Sleep(2 * time.Second)
	resp, _ = a.call("GET", "/v1/runs/"+next+"/deliveries", a.key, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	a.deliveriesWhen(next, func(ds []apiDelivery) bool { return len(ds) == 0 })
	require.Len(t, r.seen(), 3, "no delivery after the endpoint was deleted")
}

// TestWebhookDeliverySurvivesAWorkerRestart: the worker stops while a
// delivery is being retried; the delivery waits in Temporal and, once a
// worker is back, is delivered with the same webhook-id, accepted once.
func TestWebhookDeliverySurvivesAWorkerRestart(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	r := startReceiver(t, "500,500")
	a.registerWebhook(r)
	runID := a.postRun("ev-webhook-restart")
	r.waitSeen(1)
	a.worker.Stop()
	time.Sleep(3 * time.Second) // past the retry's first backoff: the attempt waits for a worker
	a.startWorker()
	ds := a.deliveriesWhen(runID, delivered)
	// Two refusals, then the acceptance. Under load the stop may cut an
	// attempt short instead of catching the retry in its backoff; that
	// attempt is logged too, so there may be one more.
	require.GreaterOrEqual(t, ds[0].Attempts, 3)
	accepted := 0
	for _, l := range r.waitSeen(3) {
		require.True(t, l.Verified, l.Error)
		require.Equal(t, ds[0].ID, l.ID)
		if l.Answered == 200 {
			accepted++
		}
	}
	require.Equal(t, 1, accepted)
}

// TestWebhookCLI: `starter webhooks` registers (secret printed once,
// plain http refused unless allowed), lists without secrets, rotates,
// shows a run's delivery log and redelivers, deletes.
func TestWebhookCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	bin := buildCommand(t, "starter")
	vars := append(auditEnvVars(t, e), "WEBHOOK_ALLOW_HOSTS="+strings.Join(hookAllowHosts(t), ","))
	run := func(wantOK bool, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"webhooks", "--tenant=" + e.tenant}, args...)...)
		cmd.Env = vars
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if wantOK {
			require.NoError(t, err, "starter webhooks %v: %s", args, stderr.String())
		} else {
			require.Error(t, err, "starter webhooks %v should fail", args)
		}
		return stdout.String(), stderr.String()
	}
	r := startReceiver(t, "")
	_, stderr := run(false, "add", "http://hooks.example.com/x")
	require.Contains(t, stderr, "must be https")
	secret, _ := run(true, "add", r.url, "--description=cli receiver")
	secret = strings.TrimSpace(secret)
	require.True(t, strings.HasPrefix(secret, "whsec_"))
	r.setSecret(secret)
	out, _ := run(true, "list")
	require.Contains(t, out, r.url)
	require.NotContains(t, out, secret, "list never shows a secret")
	id := strings.Fields(strings.Split(out, "\n")[1])[0]

	sub, _ := e.compact(gateway.Event{Model: "gpt-4o", Conversation: readData(t, "swe-agent-deepseek/django__django-11564.json")})
	l := r.waitSeen(1)[0]
	require.True(t, l.Verified, l.Error)
	// The receiver answers before the delivery's row records its 200.
	require.Eventually(t, func() bool {
		out, _ = run(true, "deliveries", sub.RunID)
		return strings.Contains(out, "200")
	}, 30*time.Second, 200*time.Millisecond, "the delivery is recorded delivered")
	require.Contains(t, out, l.ID)
	out, _ = run(true, "redeliver", l.ID)
	require.Contains(t, out, "redelivery of "+l.ID)
	require.Equal(t, l.ID, r.waitSeen(2)[1].ID)

	newSecret, _ := run(true, "rotate", id)
	require.NotEqual(t, secret, strings.TrimSpace(newSecret))
	run(true, "delete", id)
	out, _ = run(true, "list")
	require.NotContains(t, out, r.url)
	_, stderr = run(false, "delete", id)
	require.Contains(t, stderr, "not found")
}

// TestWebhookDeliverySurvivesAServerKill: the deployment in processes
// (the stack's Temporal server, a worker), a receiver that answers 500
// three times; the Temporal server is SIGKILLed while the delivery is
// being retried and started again on its files. The delivery goes on
// where it was: delivered, with one webhook-id, accepted exactly once.
func TestWebhookDeliverySurvivesAServerKill(t *testing.T) {
	t.Parallel()
	workerBin := buildCommand(t, "worker")
	starterBin := buildCommand(t, "starter")
	p := startProcStack(t, "TEMPORAL_TASK_QUEUE=webhook-kill", "WEBHOOK_ALLOW_HOSTS="+strings.Join(hookAllowHosts(t), ","))
	st, env := p.store, p.env
	startWorkerProcess(t, workerBin, "worker", env)

	r := startReceiver(t, "500,500,500")
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	_, _, err = st.AddWebhook(t.Context(), "kill", r.url, "", secret)
	require.NoError(t, err)
	r.setSecret(secret)

	input, err := filepath.Abs(filepath.Join(dataDir, "swe-agent-deepseek/django__django-11564.json"))
	require.NoError(t, err)
	out, err := runCommand(starterBin, env, "compact", input, "--tenant", "kill", "--json", "--wait", "2m")
	require.NoError(t, err, out)
	var res struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, "succeeded", res.Status)

	r.waitSeen(1)
	p.killServer(t)

	var ds []store.Delivery
	require.Eventually(t, func() bool {
		ds, err = st.ListDeliveries(t.Context(), "kill", res.RunID)
		return err == nil && len(ds) == 1 && ds[0].Status == store.DeliveryDelivered
	}, 3*time.Minute, 250*time.Millisecond, "deliveries: %+v", ds)
	accepted := 0
	for _, l := range r.seen() {
		require.True(t, l.Verified, l.Error)
		require.Equal(t, ds[0].ID, l.ID, "one webhook-id across the restart")
		if l.Answered == 200 {
			accepted++
		}
	}
	require.Equal(t, 1, accepted, "accepted exactly once")
	require.GreaterOrEqual(t, ds[0].Attempts, 4)
}
