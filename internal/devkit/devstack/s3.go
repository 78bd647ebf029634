package devstack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/devkit/s3server"
)

// s3local checks no signatures; these only have to be non-empty and stable.
const (
	s3AccessKey = "devstack"
	s3SecretKey = "devstack-secret"
)

// s3Server is the embedded S3 server with the bucket already created.
type s3Server struct {
	endpoint  string
	accessKey string
	secretKey string
	close     func() error
}

// startS3 serves Dir/s3 over the S3 protocol on port (0: a free one) and makes sure
// Bucket exists, using the same client code the application uses.
func startS3(ctx context.Context, dir string, port int) (*s3Server, error) {
	srv, err := s3server.Start(s3server.S3Local, filepath.Join(dir, "s3"), hostPort(port), s3AccessKey, s3SecretKey)
	if err != nil {
		return nil, fmt.Errorf("start s3: %w", err)
	}
	store, err := blob.New(ctx, blob.Config{
		Endpoint:  srv.Endpoint,
		Bucket:    Bucket,
		AccessKey: s3AccessKey,
		SecretKey: s3SecretKey,
		PathStyle: true,
	})
	if err == nil {
		err = store.EnsureBucket(ctx)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create s3 bucket %q: %w", Bucket, err), srv.Stop())
	}
	return &s3Server{
		endpoint:  srv.Endpoint,
		accessKey: s3AccessKey,
		secretKey: s3SecretKey,
		close:     srv.Stop,
	}, nil
}
