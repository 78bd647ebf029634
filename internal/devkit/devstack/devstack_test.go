package devstack

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const testTaskQueue = "devstack-test"

func greetWorkflow(_ workflow.Context, name string) (string, error) {
	return "hello " + name, nil
}

// testDir returns a state folder the postgres OS user can reach when the
// test runs as root (t.TempDir's parent is private to the test's user).
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "devstack-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// logWriter sends the server's warnings to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startStack(t *testing.T, dir string) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, Options{Dir: dir, Log: logWriter{t}})
	require.NoError(t, err)
	t.Logf("Start took %s: temporal=%s db=%s s3=%s", time.Since(began), s.TemporalAddress, s.DatabaseURL, s.S3Endpoint)
	return s
}

func closeStack(t *testing.T, s *Stack) {
	t.Helper()
	began := time.Now()
	require.NoError(t, s.Close())
	t.Logf("Close took %s", time.Since(began))
}

func dialTemporal(t *testing.T, s *Stack) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Namespace: s.Namespace})
	require.NoError(t, err)
	return c
}

func s3Client(t *testing.T, s *Stack) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.S3Endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.S3AccessKey, s.S3SecretKey, ""),
	})
}

func getObject(ctx context.Context, t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	require.NoError(t, err)
	defer func() { _ = out.Body.Close() }()
	data, err := io.ReadAll(out.Body)
	require.NoError(t, err)
	return data
}

// TestStackServesAndPersists uses every service, restarts the stack on the
// same Dir and checks that the workflow history, the table and the object
// written before the restart are still there.
func TestStackServesAndPersists(t *testing.T) {
	dir := testDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	payload := []byte("devstack object " + time.Now().Format(time.RFC3339Nano))
	const objectKey = "test/object.txt"

	// First run: use every service.
	s := startStack(t, dir)
	require.Equal(t, "default", s.Namespace)
	require.Equal(t, "compactor", s.S3Bucket)

	tc := dialTemporal(t, s)
	w := worker.New(tc, testTaskQueue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	require.NoError(t, w.Start())
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       "devstack-greet",
		TaskQueue:                testTaskQueue,
		WorkflowExecutionTimeout: time.Minute,
	}, greetWorkflow, "devstack")
	require.NoError(t, err)
	var greeting string
	require.NoError(t, run.Get(ctx, &greeting))
	require.Equal(t, "hello devstack", greeting)
	w.Stop()
	tc.Close()

	db, err := pgx.Connect(ctx, s.DatabaseURL)
	require.NoError(t, err)
	require.NoError(t, db.Ping(ctx))
	var dbName string
	require.NoError(t, db.QueryRow(ctx, "SELECT current_database()").Scan(&dbName))
	require.True(t, strings.HasPrefix(dbName, "compactor"), "database %q", dbName)
	_, err = db.Exec(ctx, "CREATE TABLE IF NOT EXISTS devstack_probe (v text); INSERT INTO devstack_probe VALUES ('kept')")
	require.NoError(t, err)
	require.NoError(t, db.Close(ctx))

	sc := s3Client(t, s)
	_, err = sc.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.S3Bucket), Key: aws.String(objectKey), Body: bytes.NewReader(payload),
	})
	require.NoError(t, err)
	require.Equal(t, payload, getObject(ctx, t, sc, s.S3Bucket, objectKey))

	closeStack(t, s)

	first := *s
	// Second run on the same Dir: everything from the first run is back,
	// on the same ports, so a running starter needs no new settings.
	s = startStack(t, dir)
	defer closeStack(t, s)
	require.Equal(t, first.TemporalAddress, s.TemporalAddress, "temporal keeps its port")
	require.Equal(t, first.S3Endpoint, s.S3Endpoint, "s3 keeps its port")
	require.Equal(t, first.DatabaseURL, s.DatabaseURL, "postgres keeps its port")

	tc = dialTemporal(t, s)
	defer tc.Close()
	desc, err := tc.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
	var lastEvent enumspb.EventType
	events := tc.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for events.HasNext() {
		e, err := events.Next()
		require.NoError(t, err)
		lastEvent = e.GetEventType()
	}
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, lastEvent)

	db, err = pgx.Connect(ctx, s.DatabaseURL)
	require.NoError(t, err)
	defer func() { _ = db.Close(ctx) }()
	var kept string
	require.NoError(t, db.QueryRow(ctx, "SELECT v FROM devstack_probe").Scan(&kept))
	require.Equal(t, "kept", kept)

	require.Equal(t, payload, getObject(ctx, t, s3Client(t, s), s.S3Bucket, objectKey))
}

// TestStartRejectsUnreachableDatabase checks that a bad DatabaseURL fails
// Start with the URL problem and starts nothing else.
func TestStartRejectsUnreachableDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{
		Dir:         dir,
		DatabaseURL: "postgres://postgres@127.0.0.1:1/none?sslmode=disable",
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "database URL")
	_, statErr := os.Stat(dir + "/" + temporalDBFile)
	require.True(t, os.IsNotExist(statErr), "temporal must not start when the database is unreachable")
}

// TestStartRejectsBusyTemporalPort checks that a taken fixed port is an
// error rather than the server's fatal exit.
func TestStartRejectsBusyTemporalPort(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = busy.Close() }()
	port := busy.Addr().(*net.TCPAddr).Port
	// Called directly: through Start, Postgres would come first.
	_, _, err = startTemporal(context.Background(), t.TempDir(), port, io.Discard)
	require.Error(t, err)
	require.Contains(t, err.Error(), strconv.Itoa(port))
}

// TestLockDirExcludesSecondUser checks that one state folder serves one
// stack at a time and is free again after unlock.
func TestLockDirExcludesSecondUser(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	require.NoError(t, err)
	_, err = lockDir(dir)
	require.ErrorContains(t, err, "in use")
	require.NoError(t, unlock())
	unlock, err = lockDir(dir)
	require.NoError(t, err)
	require.NoError(t, unlock())
}

func TestQuoteConf(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", "''"},
		{"/tmp/x", "'/tmp/x'"},
		{"it's", "'it''s'"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, quoteConf(tt.in), "quoteConf(%q)", tt.in)
	}
}
