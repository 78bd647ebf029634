package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// Policy says which endpoints may be registered and reached: https
// everywhere, plain http only on the hosts the operator allow-lists
// (WEBHOOK_ALLOW_HOSTS, e.g. loopback for the dev stack). An endpoint
// whose name resolves to a loopback, private, link-local or otherwise
// internal address is refused at connection time unless its host is
// allow-listed, so that a tenant cannot make the worker call into the
// deployment's own network.
type Policy struct {
	// AllowHosts are host names or IP addresses (no port) allowed over
	// plain http and on internal addresses.
	AllowHosts []string
}

func (p Policy) allowed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.AllowHosts {
		if strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			return true
		}
	}
	return false
}

// MaxURLLength bounds an endpoint's URL.
const MaxURLLength = 2048

// CheckURL reports why raw may not be an endpoint, naming the problem.
func (p Policy) CheckURL(raw string) error {
	if raw == "" {
		return errors.New("is empty")
	}
	if len(raw) > MaxURLLength {
		return fmt.Errorf("is longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("has no host")
	}
	if u.User != nil {
		return errors.New("must not carry credentials (user:password@); authenticate the signature instead")
	}
	if u.Fragment != "" {
		return errors.New("must not have a #fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.allowed(u.Hostname()) {
			return fmt.Errorf("must be https (plain http only for the operator's allowed hosts, and %q is not one)", u.Hostname())
		}
	default:
		return fmt.Errorf("scheme %q is not https", u.Scheme)
	}
	return nil
}

// internal reports whether addr is not on the public internet.
func internal(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsMulticast() || addr.IsUnspecified() || addr.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(addr) // carrier-grade NAT
}

// dialer refuses connections to internal addresses for hosts that are
// not allow-listed: the check runs on the address actually dialled, after
// name resolution, so a name that resolves inside is refused too.
func (p Policy) dialer() *net.Dialer {
	return &net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		addr, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("webhook: dial %s: not an IP address", address)
		}
		if internal(addr) && !p.allowed(addr.String()) {
			return fmt.Errorf("webhook: %s is an internal address; allow-list the endpoint's host to reach it", addr)
		}
		return nil
	}}
}

// dialContext dials as the dialer does, but lets allow-listed host names
// reach whatever they resolve to.
func (p Policy) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err == nil && p.allowed(host) {
		return (&net.Dialer{}).DialContext(ctx, network, address)
	}
	return p.dialer().DialContext(ctx, network, address)
}
