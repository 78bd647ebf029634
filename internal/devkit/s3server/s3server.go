// Package s3server starts the local S3 server that the tests (blobtest),
// the bench and the dev stack run on: versitygw, a production S3 gateway
// in its own process, or the embedded s3local (gofakes3, in-process), both
// over a folder. The choice between them is made here once, so that the
// three agree on what "the S3 server" is.
package s3server

import (
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/devkit/s3local"
	"github.com/ctxcompact/orchestrator/internal/testkit/versitygw"
)

// Kinds of server Start accepts.
const (
	// Auto is versitygw when its binary is installed, else s3local.
	Auto = ""
	// VersityGW fails when the binary is missing instead of falling back.
	VersityGW = "versitygw"
	// S3Local is the embedded server; it is always there.
	S3Local = "s3local"
)

// Server is a running S3 server.
type Server struct {
	// Kind is VersityGW or S3Local.
	Kind string
	// Endpoint is its base URL (path-style); Addr its host:port.
	Endpoint string
	Addr     string
	// PID is versitygw's process id, 0 for the in-process s3local.
	PID int
	// Description names the server and its version, for reports.
	Description string

	stop func() error
}

// Start serves dir over the S3 protocol with the given root credentials.
// addr is s3local's listen address ("127.0.0.1:0" for a free port);
// versitygw always picks a free port of its own.
func Start(kind, dir, addr, accessKey, secretKey string) (*Server, error) {
	switch kind {
	case VersityGW, Auto:
		bin, err := versitygw.Find()
		if err != nil && kind == VersityGW {
			return nil, err
		}
		if err == nil {
			srv, err := versitygw.Start(bin, dir, accessKey, secretKey)
			if err != nil {
				return nil, err
			}
			return &Server{Kind: VersityGW, Endpoint: srv.Endpoint, Addr: srv.Addr, PID: srv.PID, stop: srv.Stop,
				Description: fmt.Sprintf("versitygw (version %q, %s; posix backend over a folder, its own process)", versitygw.Version(bin), bin)}, nil
		}
		return startS3Local(dir, addr, "; versitygw not found")
	case S3Local:
		return startS3Local(dir, addr, "")
	default:
		return nil, fmt.Errorf("S3 server %q: want %q or %q", kind, VersityGW, S3Local)
	}
}

func startS3Local(dir, addr, why string) (*Server, error) {
	srv, err := s3local.Start(dir, addr)
	if err != nil {
		return nil, fmt.Errorf("start s3local: %w", err)
	}
	return &Server{Kind: S3Local, Endpoint: srv.Endpoint(), Addr: srv.Addr(), stop: srv.Close,
		Description: "s3local (embedded gofakes3 over a folder, in-process" + why + ")"}, nil
}

// Stop stops the server; its folder stays for the caller to remove.
func (s *Server) Stop() error { return s.stop() }
