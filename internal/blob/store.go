// Package blob is the S3 repository: tenant-prefixed, content-addressed
// objects on any S3-compatible endpoint, with SHA-256 verification and a
// single place (IsRetryable) where S3 errors are classified.
package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Defaults applied by New when the Config leaves a field zero.
const (
	// DefaultTimeout bounds one operation, SDK retries included. A 5 MB
	// object moves in well under a second on any sane link; the margin is
	// for slow gateways, and anything slower is better retried by Temporal.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxAttempts keeps SDK retries few: the pipeline retries whole
	// activities, and stacked retry loops multiply the wait on an outage.
	DefaultMaxAttempts = 3
	// DefaultRegion is used for custom endpoints that ignore the region but
	// still need one for SigV4.
	DefaultRegion = "us-east-1"
	// contentType is stored on every object: blobs are opaque to S3 and
	// only ever read back by this package.
	contentType = "application/octet-stream"
	// metaSHA256 is the user-metadata key (x-amz-meta-sha256) holding the
	// hex SHA-256 of the object body.
	metaSHA256 = "sha256"
	// maxBackoff caps the SDK's delay between its few attempts.
	maxBackoff = 2 * time.Second
)

// Config locates a bucket on an S3-compatible endpoint.
type Config struct {
	// Endpoint is the base URL of an S3-compatible server
	// ("http://127.0.0.1:7070"); empty means AWS S3.
	Endpoint string
	// Region for request signing; DefaultRegion when empty.
	Region string
	// Bucket holding all objects; required.
	Bucket string
	// AccessKey and SecretKey are static credentials; when both are empty
	// the SDK's default chain (env, shared files, IAM role) is used.
	AccessKey string
	SecretKey string
	// PathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint, as most self-hosted servers require.
	PathStyle bool

	// Timeout bounds each operation; DefaultTimeout when zero.
	Timeout time.Duration
	// MaxAttempts is the SDK's attempts per operation; DefaultMaxAttempts
	// when zero.
	MaxAttempts int
	// ListPageSize is MaxKeys for each List request; zero leaves the
	// server default (1000). Small values exist to exercise paging.
	ListPageSize int32
	// HTTPClient replaces the SDK's HTTP client, e.g. to observe requests
	// in tests; nil keeps the SDK default.
	HTTPClient *http.Client
	// CacheBytes bounds the in-process cache of content-addressed objects
	// recently written with PutContent or read with Get/GetVerified (see
	// cache.go); zero disables it. Objects larger than CacheBytes/8 are
	// not cached.
	CacheBytes int64
}

// Ref identifies stored content: where it is, its SHA-256 and size.
type Ref struct {
	Key    string
	SHA256 string
	Size   int64
}

// Store reads and writes objects in one bucket. It is safe for concurrent
// use.
type Store struct {
	client   *s3.Client
	bucket   string
	timeout  time.Duration
	pageSize int32
	cache    *cache // nil when disabled
}

// New builds a Store for cfg. It does not contact the server; call
// EnsureBucket to check (and create) the bucket.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("blob config: bucket is empty")
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("blob config: access key and secret key must be given together")
	}
	if cfg.Timeout < 0 || cfg.MaxAttempts < 0 || cfg.ListPageSize < 0 || cfg.CacheBytes < 0 {
		return nil, fmt.Errorf("blob config: negative timeout (%s), max attempts (%d), list page size (%d) or cache bytes (%d)",
			cfg.Timeout, cfg.MaxAttempts, cfg.ListPageSize, cfg.CacheBytes)
	}
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	attempts := cfg.MaxAttempts
	if attempts == 0 {
		attempts = DefaultMaxAttempts
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}

	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = maxBackoff
				// The client-side retry budget would turn a long outage
				// into "quota exceeded" errors that outlive it; retries
				// are already few, so it buys nothing here.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("blob config: load aws config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Integrity is ours: content keys are named by their SHA-256 and
		// checked on read, the archive's SHA-256 is checked by S3 itself
		// (PutContentVerified), and SigV4 signs every body's hash. The
		// SDK's extra CRC32 on every request (sent as aws-chunked
		// trailers) only hashes each body again, costs an S3-compatible
		// server about as much CPU as the rest of the request, and some
		// of them refuse it; it is used only where an API requires it.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		// Set here rather than in LoadDefaultConfig, which refuses a plain
		// *http.Client when AWS_CA_BUNDLE is set in the environment.
		if cfg.HTTPClient != nil {
			o.HTTPClient = cfg.HTTPClient
		}
	})
	return &Store{client: client, bucket: cfg.Bucket, timeout: timeout, pageSize: cfg.ListPageSize,
		cache: newCache(cfg.CacheBytes)}, nil
}

// Bucket returns the bucket this Store works in.
func (s *Store) Bucket() string { return s.bucket }

// Client returns the underlying S3 client for operations this package does
// not wrap (tests, administration).
func (s *Store) Client() *s3.Client { return s.client }

// opContext bounds one operation by the Store's timeout.
func (s *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Ready checks that the S3 endpoint answers for the bucket (a HEAD), for a
// readiness probe.
func (s *Store) Ready(ctx context.Context) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		return fmt.Errorf("head bucket %q: %w", s.bucket, err)
	}
	return nil
}

// EnsureBucket creates the bucket unless it already exists and is ours.
// HEAD comes first so that credentials without s3:CreateBucket work against
// a bucket provisioned elsewhere.
func (s *Store) EnsureBucket(ctx context.Context) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	if err == nil {
		return nil
	}
	if !isMissingBucket(err) {
		return fmt.Errorf("head bucket %q: %w", s.bucket, err)
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(s.bucket)}
	if region := s.client.Options().Region; region != DefaultRegion {
		// Outside us-east-1, AWS requires the location to match the region.
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(region),
		}
	}
	_, err = s.client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %q: %w", s.bucket, err)
	}
	return nil
}

// isMissingBucket reports a HEAD bucket 404 (which has no body, hence no
// specific code) or an explicit NoSuchBucket.
func isMissingBucket(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NotFound" || apiErr.ErrorCode() == "NoSuchBucket") {
		return true
	}
	var statusErr interface{ HTTPStatusCode() int }
	return errors.As(err, &statusErr) && statusErr.HTTPStatusCode() == http.StatusNotFound
}

// SHA256Hex returns the lowercase hex SHA-256 of data.
func SHA256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// headAboveBytes is the size from which PutContent asks S3 whether it
// holds an object before uploading it: a retried step then costs a HEAD
// instead of the upload. Smaller objects are uploaded again, one request
// instead of two.
const headAboveBytes = 256 << 10

// PutContent stores data under its content key for tenant and kind. An
// object of at least headAboveBytes that is already there with the same
// SHA-256 is not uploaded again, so a retried activity costs one HEAD; if
// the key holds something else (a damaged object) it is overwritten with
// the right bytes; smaller objects are always uploaded. S3 is asked even
// when the key is cached, since another process may have deleted the
// object; either way the bytes are then cached for the next Get.
func (s *Store) PutContent(ctx context.Context, tenant, kind string, data []byte) (Ref, error) {
	ref, err := contentRef(tenant, kind, data)
	if err != nil {
		return Ref{}, fmt.Errorf("put content: %w", err)
	}
	return s.putContentAt(ctx, ref, data)
}

// PutRunContent is PutContent for an intermediate object of run runID (a
// working copy, a chunk, a transcript, a summary): under the run's own
// prefix (RunContentKey), so that the run's intermediates go as one
// prefix once it is final (DeletePrefix) and never another run's.
func (s *Store) PutRunContent(ctx context.Context, tenant, runID, kind string, data []byte) (Ref, error) {
	ref, err := contentRef(tenant, kind, data)
	if err != nil {
		return Ref{}, fmt.Errorf("put run content: %w", err)
	}
	if ref.Key = RunContentKey(tenant, runID, kind, ref.SHA256); ref.Key == "" {
		return Ref{}, fmt.Errorf("put run content: %w", ValidateRunID(runID))
	}
	return s.putContentAt(ctx, ref, data)
}

// PutRunContentString is PutRunContent for a text, without a copy of it
// (see PutContentString).
func (s *Store) PutRunContentString(ctx context.Context, tenant, runID, kind, text string) (Ref, error) {
	return s.PutRunContent(ctx, tenant, runID, kind, unsafe.Slice(unsafe.StringData(text), len(text)))
}

// DeletePrefix deletes every object under a run's prefix (RunPrefix) and
// returns how many it deleted. Safe to repeat. No other prefix is
// accepted: a whole tenant is never one call away.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	parts := strings.Split(prefix, "/")
	if len(parts) != 5 || parts[4] != "" || parts[2] != "runs" {
		return 0, fmt.Errorf("delete prefix %q: not a run's prefix (tenants/<tenant>/runs/<run>/)", prefix)
	}
	if want, err := RunPrefix(parts[1], parts[3]); err != nil || want != prefix {
		return 0, fmt.Errorf("delete prefix %q: not a run's prefix (tenants/<tenant>/runs/<run>/)", prefix)
	}
	keys, err := s.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("delete prefix: %w", err)
	}
	// One DeleteObjects request per 1,000 keys (S3's bound), not one
	// request per object: a run's release costs a List and a delete.
	for start := 0; start < len(keys); start += 1000 {
		batch := keys[start:min(start+1000, len(keys))]
		if err := s.deleteBatch(ctx, batch); err != nil {
			return 0, fmt.Errorf("delete prefix %s: %w", prefix, err)
		}
	}
	return len(keys), nil
}

// deleteBatch deletes keys (at most 1,000) in one request and evicts
// them from the cache; a key already gone is not an error.
func (s *Store) deleteBatch(ctx context.Context, keys []string) error {
	objs := make([]types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
	}
	octx, cancel := s.opContext(ctx)
	defer cancel()
	out, err := s.client.DeleteObjects(octx, &s3.DeleteObjectsInput{Bucket: aws.String(s.bucket),
		Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
	// After the request, and even on error (it may have landed).
	for _, k := range keys {
		s.invalidate(k)
	}
	if err = mapError(err); err != nil {
		return err
	}
	for _, e := range out.Errors {
		if aws.ToString(e.Code) != "NoSuchKey" {
			return fmt.Errorf("delete %s: %s: %s", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
	return nil
}

// putContentAt uploads data under ref.Key as PutContent does.
func (s *Store) putContentAt(ctx context.Context, ref Ref, data []byte) (Ref, error) {
	sum := ref.SHA256
	var epoch uint64
	if s.cache != nil {
		epoch = s.cache.currentEpoch()
	}

	if len(data) < headAboveBytes {
		// Uploading again costs about what asking first does.
		if err := s.put(ctx, ref.Key, sum, data); err != nil {
			return Ref{}, fmt.Errorf("put content %s: %w", ref.Key, err)
		}
	} else {
		stored, err := s.storedSHA256(ctx, ref.Key)
		switch {
		case err == nil && stored == sum:
		case err != nil && !errors.Is(err, ErrNotFound):
			return Ref{}, fmt.Errorf("put content %s: %w", ref.Key, err)
		default:
			if err := s.put(ctx, ref.Key, sum, data); err != nil {
				return Ref{}, fmt.Errorf("put content %s: %w", ref.Key, err)
			}
		}
	}
	if s.cache != nil {
		s.cache.add(ref.Key, data, epoch)
	}
	return ref, nil
}

// PutContentString is PutContent for a text, without a copy of it: a
// text of megabytes (a transcript, a tool result) would otherwise be
// copied once to become bytes, before the cache makes its own copy.
// PutContent only reads data (to hash it, to upload it, to copy it into
// the cache), so the text's bytes serve as they are.
func (s *Store) PutContentString(ctx context.Context, tenant, kind, text string) (Ref, error) {
	return s.PutContent(ctx, tenant, kind, unsafe.Slice(unsafe.StringData(text), len(text)))
}

// SHA256HexString is SHA256Hex of a text, without a copy of it.
func SHA256HexString(text string) string {
	return SHA256Hex(unsafe.Slice(unsafe.StringData(text), len(text)))
}

// PutContentVerified is PutContent for an object that must be proven
// stored intact before anything relies on it (an archived original). The
// upload carries the SHA-256 as the object's S3 checksum
// (x-amz-checksum-sha256): a server that checks it refuses other bytes
// (BadDigest, retryable) and echoes it once it stored them, which proves
// the object without reading it back. When the answer does not echo it (a
// server without checksum support), the object is read back from S3 and
// hashed instead (GetVerifiedFromS3). It always uploads: a proof of an
// object written earlier would need that read.
func (s *Store) PutContentVerified(ctx context.Context, tenant, kind string, data []byte) (Ref, error) {
	ref, err := contentRef(tenant, kind, data)
	if err != nil {
		return Ref{}, fmt.Errorf("put verified content: %w", err)
	}
	var epoch uint64
	if s.cache != nil {
		epoch = s.cache.currentEpoch()
	}
	raw, _ := hex.DecodeString(ref.SHA256) // contentRef made it
	checksum := base64.StdEncoding.EncodeToString(raw)
	echoed, err := s.putObject(ctx, ref.Key, ref.SHA256, data, checksum)
	if err != nil {
		return Ref{}, fmt.Errorf("put verified content %s: %w", ref.Key, err)
	}
	if echoed != checksum {
		// Our own hash decides (the client does not check stored
		// checksums): a mismatch is bytes damaged on the way up.
		back, err := s.fetch(ctx, ref.Key)
		if err != nil {
			return Ref{}, fmt.Errorf("put verified content %s: read back: %w", ref.Key, err)
		}
		if got := SHA256Hex(back); got != ref.SHA256 {
			return Ref{}, fmt.Errorf("put verified content %s: %w: read back sha256 %s", ref.Key, ErrDamagedUpload, got)
		}
	}
	if s.cache != nil {
		s.cache.add(ref.Key, data, epoch)
	}
	return ref, nil
}

// contentRef is the content key and reference of data for tenant and
// kind, after checking both.
func contentRef(tenant, kind string, data []byte) (Ref, error) {
	if err := ValidateTenant(tenant); err != nil {
		return Ref{}, err
	}
	if err := ValidateKind(kind); err != nil {
		return Ref{}, err
	}
	sum := SHA256Hex(data)
	return Ref{Key: ContentKey(tenant, kind, sum), SHA256: sum, Size: int64(len(data))}, nil
}

// Put stores data under key, overwriting whatever is there, and records its
// SHA-256 in the object metadata. What Put writes is never cached, and a
// Put to a content key evicts it, so later reads see what S3 holds.
func (s *Store) Put(ctx context.Context, key string, data []byte) (Ref, error) {
	if err := validateKey(key); err != nil {
		return Ref{}, fmt.Errorf("put: %w", err)
	}
	sum := SHA256Hex(data)
	err := s.put(ctx, key, sum, data)
	s.invalidate(key) // even on error: the PUT may have landed
	if err != nil {
		return Ref{}, fmt.Errorf("put %s: %w", key, err)
	}
	return Ref{Key: key, SHA256: sum, Size: int64(len(data))}, nil
}

// invalidate evicts a content key from the cache; other keys are never
// cached.
func (s *Store) invalidate(key string) {
	if s.cache == nil {
		return
	}
	if _, ok := contentKeySHA(key); ok {
		s.cache.invalidate(key)
	}
}

func (s *Store) put(ctx context.Context, key, sum string, data []byte) error {
	_, err := s.putObject(ctx, key, sum, data, "")
	return err
}

// putObject uploads data under key with its SHA-256 (hex) in the metadata
// and, when checksum (base64) is set, as the object's S3 checksum for the
// server to check; it returns the checksum the server echoed ("" if none).
func (s *Store) putObject(ctx context.Context, key, sum string, data []byte, checksum string) (string, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String(contentType),
		Metadata:      map[string]string{metaSHA256: sum},
	}
	if checksum != "" {
		in.ChecksumSHA256 = aws.String(checksum)
	}
	var out *s3.PutObjectOutput
	var err error
	for attempt := 1; ; attempt++ {
		out, err = s.client.PutObject(ctx, in)
		if err == nil || !isFolderRace(err) || attempt == folderRaceAttempts {
			break
		}
		// The body is read again from its start.
		in.Body = bytes.NewReader(data)
	}
	if err != nil {
		return "", mapError(err)
	}
	return aws.ToString(out.ChecksumSHA256), nil
}

// folderRaceAttempts bounds the immediate retries of a put that lost a
// race with a removal of empty folders (isFolderRace).
const folderRaceAttempts = 5

// isFolderRace reports whether a put was refused because an S3 server
// over a file system (versitygw) removed an empty folder of the key's
// path while the put was creating it: deleting a run's last object removes
// the folders above it that became empty (tenants/<t>/runs/ included),
// and a put of another run of the tenant that had just seen that folder
// then fails to make its own under it. versitygw answers 409
// ExistingObjectIsDirectory for it, the code it also gives a key that
// really is a folder, which no content key of this package can be (every
// key ends in a digest, under a fixed depth). Putting again makes the
// folders afresh.
func isFolderRace(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ExistingObjectIsDirectory"
}

// storedSHA256 returns the sha256 metadata of key ("" if the object has
// none), or an error wrapping ErrNotFound.
func (s *Store) storedSHA256(ctx context.Context, key string) (string, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return "", mapError(err)
	}
	// Servers differ in how they case metadata keys.
	for k, v := range out.Metadata {
		if strings.EqualFold(k, metaSHA256) {
			return v, nil
		}
	}
	return "", nil
}

// Get returns the whole object at key, or an error wrapping ErrNotFound. A
// content key may be served from the in-process cache; the slice returned
// is always the caller's own.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	data, _, err := s.get(ctx, key, true)
	return data, err
}

// GetString is Get for a text object: the object at key as a string, in
// one copy of the bytes when the key is cached (Get's private copy and
// its conversion would be two).
func (s *Store) GetString(ctx context.Context, key string) (string, error) {
	if err := validateKey(key); err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	if s.cache != nil {
		if _, cacheable := contentKeySHA(key); cacheable {
			if text, ok := s.cache.getString(key); ok {
				return text, nil
			}
		}
	}
	data, _, err := s.get(ctx, key, false)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// GetVerified returns the object at key after checking that its SHA-256 is
// wantSHA; a mismatch is an error wrapping ErrChecksum. This is how an
// archived original is proven intact before anything replaces it.
//
// A cached content key is served without contacting S3: the cache only
// holds bytes whose hash is the key's sha, so they are intact, but a hit
// does not prove that S3 still holds them. GetVerifiedFromS3 does.
func (s *Store) GetVerified(ctx context.Context, key, wantSHA string) ([]byte, error) {
	return s.getVerified(ctx, key, wantSHA, true)
}

// GetVerifiedFromS3 is GetVerified that always reads the object from S3,
// for proving that S3 (not this process) holds intact bytes, e.g. reading
// back a write before its source is replaced. Verified bytes of a content
// key are still cached for later reads.
func (s *Store) GetVerifiedFromS3(ctx context.Context, key, wantSHA string) ([]byte, error) {
	return s.getVerified(ctx, key, wantSHA, false)
}

func (s *Store) getVerified(ctx context.Context, key, wantSHA string, useCache bool) ([]byte, error) {
	if err := ValidateSHA256(wantSHA); err != nil {
		return nil, fmt.Errorf("get verified %s: %w", key, err)
	}
	data, got, err := s.get(ctx, key, useCache)
	if err != nil {
		return nil, err
	}
	if got == "" {
		got = SHA256Hex(data)
	}
	if got != wantSHA {
		return nil, fmt.Errorf("get verified %s: %w: want %s, got %s (%d bytes)", key, ErrChecksum, wantSHA, got, len(data))
	}
	return data, nil
}

// get reads key, from the cache when useCache allows and it holds the key,
// else from S3, caching what it read if key is a content key and the bytes
// hash to its sha. sum is the bytes' SHA-256 when it is known without
// hashing again (a hit, or a miss that hashed to decide), else "".
func (s *Store) get(ctx context.Context, key string, useCache bool) (data []byte, sum string, err error) {
	if err := validateKey(key); err != nil {
		return nil, "", fmt.Errorf("get: %w", err)
	}
	keySHA, cacheable := "", false
	var epoch uint64
	if s.cache != nil {
		keySHA, cacheable = contentKeySHA(key)
	}
	if cacheable {
		if useCache {
			if data, ok := s.cache.get(key); ok {
				return data, keySHA, nil
			}
		}
		epoch = s.cache.currentEpoch()
	}
	data, err = s.fetch(ctx, key)
	if err != nil {
		return nil, "", err
	}
	if cacheable && s.cache.fits(key, len(data)) {
		// Hash before caching: a damaged or tampered object at a content
		// key must not be served from memory as if it were intact.
		if sum = SHA256Hex(data); sum == keySHA {
			s.cache.add(key, data, epoch)
		}
	}
	return data, sum, nil
}

// fetch GETs the whole object at key from S3.
func (s *Store) fetch(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, mapError(err))
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("get %s: read body: %w", key, err)
	}
	return data, nil
}

// Exists reports whether an object is stored at key.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := validateKey(key); err != nil {
		return false, fmt.Errorf("exists: %w", err)
	}
	_, err := s.storedSHA256(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("exists %s: %w", key, err)
	}
}

// Delete removes the object at key and evicts it from the cache. Deleting a
// missing object succeeds, so cleanup can be retried freely.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	// After the request, and even on error (it may have landed), so that
	// a read racing with it cannot re-cache the object afterwards.
	s.invalidate(key)
	if err = mapError(err); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// List returns every key starting with prefix, in S3's (lexicographic)
// order, following continuation tokens across pages.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	if s.pageSize > 0 {
		in.MaxKeys = aws.Int32(s.pageSize)
	}
	pages := s3.NewListObjectsV2Paginator(s.client, in)
	var keys []string
	for page := 1; pages.HasMorePages(); page++ {
		out, err := s.nextPage(ctx, pages)
		if err != nil {
			return nil, fmt.Errorf("list %q page %d: %w", prefix, page, err)
		}
		for _, obj := range out.Contents {
			keys = append(keys, aws.ToString(obj.Key))
		}
	}
	return keys, nil
}

// nextPage gives each page its own timeout, so a long listing is not cut
// short by a budget meant for one request.
func (s *Store) nextPage(ctx context.Context, pages *s3.ListObjectsV2Paginator) (*s3.ListObjectsV2Output, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	out, err := pages.NextPage(ctx)
	return out, mapError(err)
}

func validateKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if len(key) > 1024 {
		return fmt.Errorf("key %.40q...: %d bytes, S3 allows at most 1024", key, len(key))
	}
	return nil
}
