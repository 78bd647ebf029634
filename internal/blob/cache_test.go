package blob_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
)

func withCache(n int64) blobtest.Option {
	return func(cfg *blob.Config) { cfg.CacheBytes = n }
}

// rawPut writes key behind the Store's back, as another process would.
func rawPut(t *testing.T, store *blob.Store, key string, data []byte) {
	t.Helper()
	_, err := store.Client().PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(store.Bucket()), Key: aws.String(key), Body: bytes.NewReader(data),
	})
	require.NoError(t, err)
}

// rawDelete deletes key behind the Store's back.
func rawDelete(t *testing.T, store *blob.Store, key string) {
	t.Helper()
	_, err := store.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{
		Bucket: aws.String(store.Bucket()), Key: aws.String(key),
	})
	require.NoError(t, err)
}

func TestCachePutContentThenGetSkipsS3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt, withCache(1<<20))
	data := []byte(`{"messages":[{"role":"user","content":"working copy"}]}`)

	ref, err := store.PutContent(ctx, "acme", blob.KindChunk, data)
	require.NoError(t, err)
	// Gone from S3, but content keys are immutable: the cache still
	// answers, which proves no GET was needed.
	rawDelete(t, store, ref.Key)
	counter.Reset()

	got, err := store.Get(ctx, ref.Key)
	require.NoError(t, err)
	require.Equal(t, data, got)
	got, err = store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Zero(t, counter.Count(http.MethodGet), "cached reads must not reach S3")
	hits, misses := store.CacheStats()
	require.Equal(t, int64(2), hits)
	require.Zero(t, misses)

	// GetVerifiedFromS3 proves S3 holds the bytes, so it sees the delete.
	_, err = store.GetVerifiedFromS3(ctx, ref.Key, ref.SHA256)
	require.ErrorIs(t, err, blob.ErrNotFound)
	require.Equal(t, 1, counter.Count(http.MethodGet))

	// PutContent still uploads, although the key is cached.
	counter.Reset()
	_, err = store.PutContent(ctx, "acme", blob.KindChunk, data)
	require.NoError(t, err)
	require.Equal(t, 1, counter.Count(http.MethodPut))
	got, err = store.GetVerifiedFromS3(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestCacheGetMissFillsCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt, withCache(1<<20))
	data := []byte("written by another worker")
	key := blob.ContentKey("acme", blob.KindArchive, blob.SHA256Hex(data))
	rawPut(t, store, key, data)
	counter.Reset()

	for range 3 {
		got, err := store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
	require.Equal(t, 1, counter.Count(http.MethodGet))
	hits, misses := store.CacheStats()
	require.Equal(t, int64(2), hits)
	require.Equal(t, int64(1), misses)
}

func TestCacheHitReturnsCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t, withCache(1<<20))
	data := []byte("callers may scribble on what they get")
	want := bytes.Clone(data)

	ref, err := store.PutContent(ctx, "acme", blob.KindOutput, data)
	require.NoError(t, err)
	data[0] = 'X' // the caller's slice is not the cached one

	first, err := store.Get(ctx, ref.Key)
	require.NoError(t, err)
	require.Equal(t, want, first)
	first[0] = 'Y'

	second, err := store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, want, second)
	hits, _ := store.CacheStats()
	require.Equal(t, int64(2), hits)
}

func TestCacheEvictsByBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	const bound = 8 << 10 // objects up to 1 KiB (key included) are cached
	store := blobtest.New(t, opt, withCache(bound))

	refs := make([]blob.Ref, 12)
	for i := range refs {
		ref, err := store.PutContent(ctx, "acme", blob.KindChunk, randomBytes(t, 800))
		require.NoError(t, err)
		refs[i] = ref
		used, limit := store.CacheUsage()
		require.LessOrEqual(t, used, limit)
		require.Equal(t, int64(bound), limit)
	}
	used, _ := store.CacheUsage()
	require.Greater(t, used, int64(bound-1024), "the cache fills up to its bound")

	counter.Reset()
	_, err := store.Get(ctx, refs[len(refs)-1].Key)
	require.NoError(t, err)
	require.Zero(t, counter.Count(http.MethodGet), "the newest object is cached")
	_, err = store.Get(ctx, refs[0].Key)
	require.NoError(t, err)
	require.Equal(t, 1, counter.Count(http.MethodGet), "the oldest object was evicted")

	// Objects above 1/8 of the bound are never cached.
	big, err := store.PutContent(ctx, "acme", blob.KindChunk, randomBytes(t, bound/8))
	require.NoError(t, err)
	counter.Reset()
	for range 2 {
		_, err = store.Get(ctx, big.Key)
		require.NoError(t, err)
	}
	require.Equal(t, 2, counter.Count(http.MethodGet))
}

func TestCacheRecencyProtectsReadObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	const bound = 8 << 10
	store := blobtest.New(t, opt, withCache(bound))

	hot, err := store.PutContent(ctx, "acme", blob.KindChunk, randomBytes(t, 800))
	require.NoError(t, err)
	for range 12 {
		_, err := store.PutContent(ctx, "acme", blob.KindChunk, randomBytes(t, 800))
		require.NoError(t, err)
		_, err = store.Get(ctx, hot.Key) // keeps hot most recently used
		require.NoError(t, err)
	}
	counter.Reset()
	_, err = store.Get(ctx, hot.Key)
	require.NoError(t, err)
	require.Zero(t, counter.Count(http.MethodGet), "LRU, not FIFO")
}

func TestCacheNeverCachesPut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t, withCache(1<<20))

	_, err := store.Put(ctx, "runs/r1/state", []byte("v1"))
	require.NoError(t, err)
	got, err := store.Get(ctx, "runs/r1/state")
	require.NoError(t, err)
	require.Equal(t, []byte("v1"), got)

	rawPut(t, store, "runs/r1/state", []byte("v2"))
	got, err = store.Get(ctx, "runs/r1/state")
	require.NoError(t, err)
	require.Equal(t, []byte("v2"), got, "arbitrary keys may be overwritten, so they are never cached")
	hits, misses := store.CacheStats()
	require.Zero(t, hits+misses, "only content keys count")

	// Keys that merely look like content keys are not cached either.
	data := []byte("almost content addressed")
	sum := blob.SHA256Hex(data)
	upper := strings.ToUpper(sum)
	for _, key := range []string{
		"tenants/acme/archive/zz/" + sum,                  // wrong fan-out segment
		"x/tenants/acme/archive/" + sum[:2] + "/" + sum,   // extra prefix
		"tenants/acme/archive/" + upper[:2] + "/" + upper, // not lowercase hex
	} {
		rawPut(t, store, key, data)
		_, err := store.Get(ctx, key)
		require.NoError(t, err, key)
	}
	hits, misses = store.CacheStats()
	require.Zero(t, hits+misses)
}

func TestCachePutToContentKeyEvicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t, withCache(1<<20))
	ref, err := store.PutContent(ctx, "acme", blob.KindArchive, []byte("archived original"))
	require.NoError(t, err)
	_, err = store.Put(ctx, ref.Key, []byte("tampered copy"))
	require.NoError(t, err)

	_, err = store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.ErrorIs(t, err, blob.ErrChecksum, "Put must evict, so reads see what S3 holds")
}

func TestCacheSkipsMismatchedContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt, withCache(1<<20))
	data := []byte("the real content")
	key := blob.ContentKey("acme", blob.KindArchive, blob.SHA256Hex(data))
	rawPut(t, store, key, []byte("damaged bytes at a content key"))
	counter.Reset()

	for range 2 {
		got, err := store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, []byte("damaged bytes at a content key"), got)
	}
	require.Equal(t, 2, counter.Count(http.MethodGet), "bytes that do not match the key's sha are not cached")

	_, err := store.GetVerified(ctx, key, blob.SHA256Hex(data))
	require.ErrorIs(t, err, blob.ErrChecksum)
	require.Equal(t, 3, counter.Count(http.MethodGet))
	hits, misses := store.CacheStats()
	require.Zero(t, hits)
	require.Equal(t, int64(3), misses)
}

func TestCacheDeleteEvicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := blobtest.New(t, withCache(1<<20))
	ref, err := store.PutContent(ctx, "acme", blob.KindOffload, []byte("offloaded tool result"))
	require.NoError(t, err)
	used, _ := store.CacheUsage()
	require.Positive(t, used)

	require.NoError(t, store.Delete(ctx, ref.Key))
	used, _ = store.CacheUsage()
	require.Zero(t, used)
	_, err = store.Get(ctx, ref.Key)
	require.ErrorIs(t, err, blob.ErrNotFound)
	_, err = store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.ErrorIs(t, err, blob.ErrNotFound)
}

func TestCacheDisabledWithZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, counter := blobtest.WithCounter()
	store := blobtest.New(t, opt, withCache(0))
	ref, err := store.PutContent(ctx, "acme", blob.KindArchive, []byte("not cached"))
	require.NoError(t, err)
	counter.Reset()

	for range 2 {
		got, err := store.GetVerified(ctx, ref.Key, ref.SHA256)
		require.NoError(t, err)
		require.Equal(t, []byte("not cached"), got)
	}
	require.Equal(t, 2, counter.Count(http.MethodGet))
	hits, misses := store.CacheStats()
	require.Zero(t, hits+misses)
	used, limit := store.CacheUsage()
	require.Zero(t, used+limit)
}

func TestCacheRejectsNegativeBytes(t *testing.T) {
	t.Parallel()
	_, err := blob.New(context.Background(), blob.Config{Bucket: "b", CacheBytes: -1})
	require.ErrorContains(t, err, "cache bytes")
}

func TestCacheConcurrentUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const bound = 16 << 10
	store := blobtest.New(t, withCache(bound))

	payloads := make([][]byte, 24)
	refs := make([]blob.Ref, len(payloads))
	for i := range payloads {
		payloads[i] = []byte(fmt.Sprintf("object %d %s", i, bytes.Repeat([]byte{'.'}, 600)))
		ref, err := store.PutContent(ctx, "acme", blob.KindChunk, payloads[i])
		require.NoError(t, err)
		refs[i] = ref
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8*len(refs))
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range refs {
				j := (i + w*3) % len(refs)
				got, err := store.GetVerified(ctx, refs[j].Key, refs[j].SHA256)
				if err == nil && !bytes.Equal(got, payloads[j]) {
					err = fmt.Errorf("object %d: wrong bytes", j)
				}
				if err == nil {
					got[0] ^= 0xff // must not corrupt anyone else's copy
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	used, limit := store.CacheUsage()
	require.LessOrEqual(t, used, limit)
	hits, misses := store.CacheStats()
	require.Equal(t, int64(8*len(refs)), hits+misses)
}
