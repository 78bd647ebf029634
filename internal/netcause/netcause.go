// Package netcause names why an HTTP call got no answer, in words a
// tenant may read: "refused", "timeout", "dns", "tls", "connection
// reset", "canceled", "connection failed". Webhook deliveries and the
// summarizer's calls report their failures with the same words, so that
// one cause reads the same wherever it is shown.
//
// The error's own text, which can name the deployment's DNS server, what
// an internal name resolves to or whether a port is open, is never part
// of a cause.
package netcause

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
)

// The causes of a call that got no answer.
const (
	Timeout  = "timeout"
	Refused  = "refused"
	DNS      = "dns"
	TLS      = "tls"
	Reset    = "connection reset"
	Canceled = "canceled"
	// Connection is any other failure to get an answer.
	Connection = "connection failed"
)

// Of names the cause of err, a failure to get an answer ("" for nil).
func Of(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &dns):
		return DNS
	case isTLS(err):
		return TLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		// net/http's own, unexported, for a connection closed before the
		// answer came.
		strings.Contains(err.Error(), "server closed idle connection"):
		return Reset
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Connection
}

// HTTP names the cause of an answer that was not a success: "http 503".
func HTTP(status int) string { return fmt.Sprintf("http %d", status) }

// isTLS reports whether err is a failed TLS handshake or certificate
// check (including a plain-http answer to the TLS hello).
func isTLS(err error) bool {
	var (
		header   tls.RecordHeaderError
		alert    tls.AlertError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &header) || errors.As(err, &alert) || errors.As(err, &verify) || errors.As(err, &unknown) ||
		errors.As(err, &hostname) || errors.As(err, &invalid) || strings.Contains(err.Error(), "tls: ") ||
		// net/http's own, unexported: a plain-HTTP answer to the TLS hello.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}
