package blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/devkit/s3local"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
)

func TestMain(m *testing.M) { blobtest.Main(m) }

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func TestServerInUse(t *testing.T) {
	t.Parallel()
	// Reported so a run's log says which implementation the tests proved.
	name := blobtest.ServerName(t)
	require.Contains(t, []string{blobtest.ServerVersityGW, blobtest.ServerS3Local}, name)
	t.Logf("S3 server: %s at %s", name, blobtest.Endpoint(t))
}

func TestRoundTrip5MB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t)
	data := randomBytes(t, 5<<20)

	ref, err := store.Put(ctx, "big/object", data)
	require.NoError(t, err)
	require.Equal(t, "big/object", ref.Key)
	require.Equal(t, int64(len(data)), ref.Size)
	require.Equal(t, blob.SHA256Hex(data), ref.SHA256)

	got, err := store.Get(ctx, ref.Key)
	require.NoError(t, err)
	require.Equal(t, data, got)

	got, err = store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestPutContentAddressesAndDeduplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt)
	// Big enough for PutContent to ask before uploading.
	data := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("hi ", 100<<10) + `"}]}`)
	counter.Reset()

	first, err := store.PutContent(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	require.Equal(t, blob.ContentKey("acme", blob.KindArchive, blob.SHA256Hex(data)), first.Key)
	require.Equal(t, "tenants/acme/archive/"+first.SHA256[:2]+"/"+first.SHA256, first.Key)
	require.Equal(t, int64(len(data)), first.Size)
	require.Equal(t, 1, counter.Count(http.MethodPut))

	second, err := store.PutContent(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	require.Equal(t, first, second)
	require.Equal(t, 1, counter.Count(http.MethodPut), "second PutContent of the same bytes must not upload")
	require.Equal(t, 2, counter.Count(http.MethodHead))

	other, err := store.PutContent(ctx, "globex", blob.KindArchive, data)
	require.NoError(t, err)
	require.NotEqual(t, first.Key, other.Key, "tenants must not share keys")
	require.Equal(t, first.SHA256, other.SHA256)
	require.Equal(t, 2, counter.Count(http.MethodPut))
}

func TestPutContentUploadsSmallObjectsWithoutAsking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt)
	data := []byte(`{"messages":[{"role":"user","content":"hi"}]}`)
	counter.Reset()

	for range 2 {
		ref, err := store.PutContent(ctx, "acme", blob.KindArchive, data)
		require.NoError(t, err)
		got, err := store.GetVerifiedFromS3(ctx, ref.Key, ref.SHA256)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
	require.Equal(t, 2, counter.Count(http.MethodPut), "a small object is uploaded each time")
	require.Zero(t, counter.Count(http.MethodHead), "one request instead of two")
}

func TestPutContentRepairsDamagedObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t)
	data := []byte("the original")
	key := blob.ContentKey("acme", blob.KindArchive, blob.SHA256Hex(data))
	_, err := store.Put(ctx, key, []byte("garbage at the content key"))
	require.NoError(t, err)

	ref, err := store.PutContent(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	got, err := store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestGetVerifiedDetectsTampering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t)
	ref, err := store.PutContent(ctx, "acme", blob.KindArchive, []byte("archived original"))
	require.NoError(t, err)
	_, err = store.Put(ctx, ref.Key, []byte("tampered copy"))
	require.NoError(t, err)

	_, err = store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.ErrorIs(t, err, blob.ErrChecksum)
	require.False(t, blob.IsRetryable(err))

	_, err = store.GetVerified(ctx, ref.Key, "not-a-sha")
	require.ErrorContains(t, err, "sha256")
}

func TestMissingObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t)

	_, err := store.Get(ctx, "no/such/key")
	require.ErrorIs(t, err, blob.ErrNotFound)
	require.False(t, blob.IsRetryable(err))

	exists, err := store.Exists(ctx, "no/such/key")
	require.NoError(t, err)
	require.False(t, exists)
}

func TestDeleteIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t)
	ref, err := store.PutContent(ctx, "acme", blob.KindOffload, []byte("offloaded tool result"))
	require.NoError(t, err)

	require.NoError(t, store.Delete(ctx, ref.Key))
	exists, err := store.Exists(ctx, ref.Key)
	require.NoError(t, err)
	require.False(t, exists)
	require.NoError(t, store.Delete(ctx, ref.Key), "deleting a missing object must succeed")
	require.NoError(t, store.Delete(ctx, "never/existed"))
}

func TestListFollowsPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt, func(cfg *blob.Config) { cfg.ListPageSize = 3 })

	var want []string
	for i := range 10 {
		ref, err := store.PutContent(ctx, "acme", blob.KindChunk, fmt.Appendf(nil, "chunk %d", i))
		require.NoError(t, err)
		want = append(want, ref.Key)
	}
	_, err := store.PutContent(ctx, "acme-other", blob.KindChunk, []byte("other tenant"))
	require.NoError(t, err)
	sort.Strings(want)
	counter.Reset()

	prefix, err := blob.TenantPrefix("acme")
	require.NoError(t, err)
	got, err := store.List(ctx, prefix)
	require.NoError(t, err)
	require.Equal(t, want, got)
	if blobtest.ServerName(t) == blobtest.ServerS3Local {
		// gofakes3's folder backend ignores MaxKeys and answers in one page.
		t.Log("s3local does not page; only the listing itself was checked")
	} else {
		require.GreaterOrEqual(t, counter.Count(http.MethodGet), 4, "10 keys at 3 per page need at least 4 requests")
	}

	none, err := store.List(ctx, "tenants/nobody/")
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestEnsureBucketIsIdempotent(t *testing.T) {
	t.Parallel()
	store := blobtest.New(t)
	require.NoError(t, store.EnsureBucket(context.Background()))
	require.NoError(t, store.EnsureBucket(context.Background()))
}

func TestMissingBucketIsPermanent(t *testing.T) {
	t.Parallel()
	cfg := blobtest.NewConfig(t)
	cfg.Bucket = "bt-never-created"
	store, err := blob.New(context.Background(), cfg)
	require.NoError(t, err)

	_, err = store.Put(context.Background(), "k", []byte("v"))
	require.Error(t, err)
	require.False(t, blob.IsRetryable(err), "NoSuchBucket is a configuration error: %v", err)
	require.NotErrorIs(t, err, blob.ErrNotFound)
}

func TestUnavailableServerIsRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, proxy := blobtest.NewBehindProxy(t)
	ref, err := store.PutContent(ctx, "acme", blob.KindArchive, []byte("before the outage"))
	require.NoError(t, err)

	proxy.Down()
	_, err = store.Get(ctx, ref.Key)
	require.Error(t, err)
	require.True(t, blob.IsRetryable(err), "outage must be retryable: %v", err)
	_, err = store.PutContent(ctx, "acme", blob.KindArchive, []byte("during the outage"))
	require.Error(t, err)
	require.True(t, blob.IsRetryable(err), "outage must be retryable: %v", err)

	require.NoError(t, proxy.Up())
	got, err := store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, "before the outage", string(got))
	_, err = store.PutContent(ctx, "acme", blob.KindArchive, []byte("after the outage"))
	require.NoError(t, err)
}

func TestInvalidInputIsRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t)

	_, err := store.PutContent(ctx, "../etc", blob.KindArchive, []byte("x"))
	require.ErrorContains(t, err, "tenant")
	_, err = store.PutContent(ctx, "acme", "Bad/Kind", []byte("x"))
	require.ErrorContains(t, err, "kind")
	_, err = store.Put(ctx, "", []byte("x"))
	require.ErrorContains(t, err, "empty key")
	_, err = store.Get(ctx, "")
	require.ErrorContains(t, err, "empty key")
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  blob.Config
		want string
	}{
		{"no bucket", blob.Config{}, "bucket"},
		{"access key without secret", blob.Config{Bucket: "b", AccessKey: "a"}, "together"},
		{"negative timeout", blob.Config{Bucket: "b", Timeout: -1}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := blob.New(context.Background(), tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// damagingTransport flips one byte of every PUT body on its way, as a bad
// network card would, and counts requests by method.
type damagingTransport struct{ blobtest.RequestCounter }

func (d *damagingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.Body != nil && req.ContentLength > 0 {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		body[len(body)/2] ^= 0xff
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return d.RequestCounter.RoundTrip(req)
}

// TestPutContentVerified: an archived original is proven stored intact,
// by the server's own SHA-256 check of the upload (versitygw: one PUT,
// nothing read back) or, on a server without checksums (s3local), by
// reading it back; bytes damaged on their way are refused either way with
// a retryable error, never stored as the proof of anything.
func TestPutContentVerified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := randomBytes(t, 300<<10)
	checksums := blobtest.ServerName(t) == blobtest.ServerVersityGW

	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt)
	counter.Reset()
	ref, err := store.PutContentVerified(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	require.Equal(t, blob.ContentKey("acme", blob.KindArchive, blob.SHA256Hex(data)), ref.Key)
	require.Equal(t, 1, counter.Count(http.MethodPut))
	if checksums {
		require.Zero(t, counter.Count(http.MethodGet), "the server checked the upload: nothing to read back")
	} else {
		require.Equal(t, 1, counter.Count(http.MethodGet), "no checksum echoed: read back")
	}
	got, err := store.GetVerifiedFromS3(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, data, got)

	damaging := &damagingTransport{}
	bad := blobtest.New(t, func(c *blob.Config) {
		c.HTTPClient = &http.Client{Transport: damaging}
		c.MaxAttempts = 1 // the SDK's own retries would damage each attempt too
	})
	_, err = bad.PutContentVerified(ctx, "acme", blob.KindArchive, data)
	require.Error(t, err)
	require.True(t, blob.IsRetryable(err), "damaged on its way: sending again may work: %v", err)
}

// TestPutContentVerifiedReadsBackWithoutChecksums runs the read-back on
// the embedded s3local server, which neither checks nor echoes checksums,
// whatever server the other tests use.
func TestPutContentVerifiedReadsBackWithoutChecksums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := s3local.Start(t.TempDir(), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	counter := &blobtest.RequestCounter{}
	store, err := blob.New(ctx, blob.Config{Endpoint: srv.Endpoint(), Bucket: "verified", AccessKey: "k", SecretKey: "s",
		PathStyle: true, HTTPClient: &http.Client{Transport: counter}})
	require.NoError(t, err)
	require.NoError(t, store.EnsureBucket(ctx))
	data := []byte("an original conversation")
	counter.Reset()
	ref, err := store.PutContentVerified(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	require.Equal(t, blob.SHA256Hex(data), ref.SHA256)
	require.Equal(t, 1, counter.Count(http.MethodPut))
	require.Equal(t, 1, counter.Count(http.MethodGet), "read back: the server echoed no checksum")
}

// headerRecorder keeps the headers of every PUT it forwards.
type headerRecorder struct {
	mu   sync.Mutex
	puts []http.Header
}

func (h *headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		h.mu.Lock()
		h.puts = append(h.puts, req.Header.Clone())
		h.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestUploadsSignTheirBody: every upload's body is covered by SigV4's
// signed SHA-256 (the server checks it), with no extra CRC32 trailer; the
// archive's upload also carries its SHA-256 as the S3 checksum.
func TestUploadsSignTheirBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &headerRecorder{}
	store := blobtest.New(t, func(c *blob.Config) { c.HTTPClient = &http.Client{Transport: rec} })
	data := []byte("a conversation to keep")
	_, err := store.PutContent(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	_, err = store.PutContentVerified(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	var puts []http.Header
	for _, h := range rec.puts {
		if h.Get("X-Amz-Meta-Sha256") != "" { // an object's upload, not the bucket's creation
			puts = append(puts, h)
		}
	}
	require.Len(t, puts, 2)
	for _, h := range puts {
		require.Equal(t, blob.SHA256Hex(data), h.Get("X-Amz-Content-Sha256"), "the signed payload hash is the body's")
		require.Empty(t, h.Get("X-Amz-Trailer"))
		require.Empty(t, h.Get("X-Amz-Checksum-Crc32"))
	}
	require.Empty(t, puts[0].Get("X-Amz-Checksum-Sha256"))
	require.NotEmpty(t, puts[1].Get("X-Amz-Checksum-Sha256"), "the archive carries its SHA-256 for S3 to check")
}

// TestGetString: a text object as a string, from the cache for a content
// key this Store wrote (no request), from S3 otherwise.
func TestGetString(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt, func(c *blob.Config) { c.CacheBytes = 1 << 20 })
	ref, err := store.PutContent(ctx, "acme", "summary", []byte("a summary naming src/a.go"))
	require.NoError(t, err)
	plain, err := store.Put(ctx, "tenants/acme/notes/plain.txt", []byte("not content-addressed"))
	require.NoError(t, err)
	counter.Reset()

	text, err := store.GetString(ctx, ref.Key)
	require.NoError(t, err)
	require.Equal(t, "a summary naming src/a.go", text)
	require.Zero(t, counter.Count(http.MethodGet), "a cached content key needs no request")

	text, err = store.GetString(ctx, plain.Key)
	require.NoError(t, err)
	require.Equal(t, "not content-addressed", text)
	require.Equal(t, 1, counter.Count(http.MethodGet))

	_, err = store.GetString(ctx, "tenants/acme/summary/ab/"+strings.Repeat("0", 64))
	require.ErrorIs(t, err, blob.ErrNotFound)
}

// TestPutContentString: a text stored without a copy is the object its
// bytes make (same key, same SHA-256, same bytes in S3 and in the cache),
// and storing it leaves the text as it was.
func TestPutContentString(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t, func(c *blob.Config) { c.CacheBytes = 8 << 20 })
	text := strings.Repeat("a transcript naming src/é.go\n", 20000) // above headAboveBytes
	want := strings.Clone(text)
	ref, err := store.PutContentString(ctx, "acme", "transcript", text)
	require.NoError(t, err)
	require.Equal(t, blob.ContentKey("acme", "transcript", blob.SHA256Hex([]byte(want))), ref.Key)
	require.Equal(t, blob.SHA256Hex([]byte(want)), blob.SHA256HexString(text))
	require.Equal(t, int64(len(want)), ref.Size)
	require.Equal(t, want, text)
	fromS3, err := store.GetVerifiedFromS3(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, want, string(fromS3))
	cached, err := store.GetString(ctx, ref.Key)
	require.NoError(t, err)
	require.Equal(t, want, cached)
}

// TestDeletePrefixReleasesOneRun: a run's intermediates go as one prefix;
// another run's, with the same bytes, and the tenant's durable objects
// stay; the cache forgets what went; only a run's prefix is accepted.
func TestDeletePrefixReleasesOneRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt)
	data := []byte("a working copy")
	r1, err := store.PutRunContent(ctx, "acme", "run-1", blob.KindWork, data)
	require.NoError(t, err)
	_, err = store.PutRunContentString(ctx, "acme", "run-1", "summary", "a summary")
	require.NoError(t, err)
	r10, err := store.PutRunContent(ctx, "acme", "run-10", blob.KindWork, data)
	require.NoError(t, err)
	durable, err := store.PutContent(ctx, "acme", blob.KindOutput, data)
	require.NoError(t, err)
	got, err := store.Get(ctx, r1.Key)
	require.NoError(t, err)
	require.Equal(t, data, got)

	prefix, err := blob.RunPrefix("acme", "run-1")
	require.NoError(t, err)
	counter.Reset()
	n, err := store.DeletePrefix(ctx, prefix)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 1, counter.Count(http.MethodPost), "one DeleteObjects request for the run")
	require.Zero(t, counter.Count(http.MethodDelete), "not a request per object")
	_, err = store.Get(ctx, r1.Key)
	require.ErrorIs(t, err, blob.ErrNotFound, "deleted, and not served from the cache")
	for _, k := range []string{r10.Key, durable.Key} {
		_, err := store.Get(ctx, k)
		require.NoError(t, err, k)
	}
	n, err = store.DeletePrefix(ctx, prefix)
	require.NoError(t, err)
	require.Zero(t, n, "safe to repeat")
	for _, bad := range []string{"", "tenants/", "tenants/acme/", "tenants/acme/runs/", "tenants/acme/runs/run-1", "tenants/acme/work/", "tenants/acme/runs/../"} {
		_, err := store.DeletePrefix(ctx, bad)
		require.Error(t, err, "%q", bad)
	}
}

// A run's put must not fail because another run of the same tenant is
// released at that moment: on an S3 server over a file system
// (versitygw), deleting a run's last object removes the now-empty
// folders above it, tenants/<t>/runs/ included, and a put creating its
// own run's folder under it at that instant was refused with 409
// ExistingObjectIsDirectory, which failed a run in CI.
func TestPutSurvivesAnotherRunsRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t)
	// Each writer puts into a run of its own and releases it, over and
	// over, so that releases and first puts of the tenant's runs cross.
	const writers, rounds = 12, 150
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < rounds; round++ {
				run := fmt.Sprintf("run-%d-%d", i, round)
				ref, err := store.PutRunContent(ctx, "tenant-a", run, blob.KindWork, []byte("working copy of "+run))
				if err == nil {
					var prefix string
					if prefix, err = blob.RunPrefix("tenant-a", run); err == nil {
						_, err = store.DeletePrefix(ctx, prefix)
					}
				}
				if err == nil {
					_, err = store.Exists(ctx, ref.Key)
				}
				if err != nil {
					errs[i] = fmt.Errorf("round %d: %w", round, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "writer %d", i)
	}
}
