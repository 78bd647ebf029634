// Package s3local runs an embedded S3-compatible server over a local folder,
// so the one-command dev stack needs no external object store. It speaks the
// real S3 HTTP protocol (path-style addressing), so the same blob.Store code
// talks to it as to AWS or a production gateway. It does not check request
// signatures: any access key works. It is for development and tests only.
package s3local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
)

// shutdownTimeout bounds how long Close waits for requests in flight.
const shutdownTimeout = 5 * time.Second

// Server is a running embedded S3 server.
type Server struct {
	dir      string
	listener net.Listener
	http     *http.Server
	done     chan error

	closeOnce sync.Once
	closeErr  error
}

// Start serves the S3 protocol on addr ("127.0.0.1:0" picks a free port),
// storing buckets and objects as files under dir, which is created if
// missing. Data written through one Server is visible to the next one
// started on the same dir.
func Start(dir, addr string) (*Server, error) {
	if dir == "" {
		return nil, errors.New("s3local: data dir is empty")
	}
	// FsPath anchors the backend in dir and refuses the filesystem root, so
	// a bad setting cannot make the backend manage "/".
	fs, err := s3afero.FsPath(dir, s3afero.FsPathCreateAll)
	if err != nil {
		return nil, fmt.Errorf("s3local: data dir %q: %w", dir, err)
	}
	backend, err := s3afero.MultiBucket(fs)
	if err != nil {
		return nil, fmt.Errorf("s3local: open backend in %q: %w", dir, err)
	}
	fake := gofakes3.New(backend,
		// Versioning is not used by blob, and the folder backend lacks it.
		gofakes3.WithoutVersioning(),
	)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("s3local: listen on %q: %w", addr, err)
	}
	s := &Server{
		dir:      dir,
		listener: ln,
		http:     &http.Server{Handler: fake.Server(), ReadHeaderTimeout: 10 * time.Second},
		done:     make(chan error, 1),
	}
	go func() { s.done <- s.http.Serve(ln) }()
	return s, nil
}

// Endpoint returns the base URL to give blob.Config.Endpoint (with
// PathStyle set).
func (s *Server) Endpoint() string {
	return "http://" + s.listener.Addr().String()
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Dir returns the folder holding the data.
func (s *Server) Dir() string { return s.dir }

// Close stops the server, letting requests in flight finish for a few
// seconds. The data stays in the folder. Closing twice is harmless.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown() })
	return s.closeErr
}

func (s *Server) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		return fmt.Errorf("s3local: shutdown: %w", err)
	}
	if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("s3local: serve: %w", err)
	}
	return nil
}
