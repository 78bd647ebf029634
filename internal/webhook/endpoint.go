package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Policy says which endpoints may be registered and reached: https
// everywhere public, plain http and internal addresses only on the
// host:port pairs the operator allow-lists (WEBHOOK_ALLOW_HOSTS, e.g. a
// dev receiver on loopback). An endpoint whose name resolves to a
// loopback, private, link-local or otherwise internal address is refused
// at connection time unless that address and port (or the endpoint's
// host and port) are allow-listed, so that a tenant cannot make the
// worker call into the deployment's own network: its database, its API,
// its metadata service.
type Policy struct {
	// AllowHosts are allow-list entries: "host:port" (a name or an IP
	// address; IPv6 in brackets, "[::1]:9000") allows that port only; a
	// bare "host" (or bare IPv6 address, "::1") allows only the default
	// ports 80 and 443. Ports are part of an entry because a host allowed
	// on every port would let a tenant reach whatever else listens on it.
	AllowHosts []string
}

// entry is one parsed allow-list entry; port "" stands for 80 and 443.
type entry struct{ host, port string }

// parseEntry reads an allow-list entry: "host", "host:port", "::1",
// "[::1]" or "[::1]:port".
func parseEntry(e string) entry {
	e = strings.TrimSpace(e)
	if h, p, err := net.SplitHostPort(e); err == nil {
		return entry{host: canonicalHost(h), port: canonicalPort(p)}
	}
	return entry{host: canonicalHost(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"))}
}

// canonicalHost lower-cases a name without its trailing dot and writes an
// IP address one way (an IPv4-mapped IPv6 address as IPv4), so that
// "::0001" matches "::1".
func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

// canonicalPort writes a port as a decimal number ("09000" is "9000"),
// or "-" for one that is not a port, which matches nothing.
func canonicalPort(p string) string {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "-"
	}
	return strconv.Itoa(n)
}

// allows reports whether host:port is allow-listed.
func (p Policy) allows(host, port string) bool {
	host, port = canonicalHost(host), canonicalPort(port)
	if port == "-" {
		return false
	}
	for _, raw := range p.AllowHosts {
		e := parseEntry(raw)
		if e.host != host {
			continue
		}
		if e.port == port || (e.port == "" && (port == "80" || port == "443")) {
			return true
		}
	}
	return false
}

// listsHost reports whether some entry names host, on any port: a
// refusal then says that the port is what is not allowed.
func (p Policy) listsHost(host string) bool {
	host = canonicalHost(host)
	for _, raw := range p.AllowHosts {
		if parseEntry(raw).host == host {
			return true
		}
	}
	return false
}

// MaxURLLength bounds an endpoint's URL.
const MaxURLLength = 2048

// defaultPorts are the ports of URLs that name none.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// Normalize writes an endpoint URL the one way every spelling of it
// has, so that registering the same receiver again finds it: the scheme
// and host lowercased, the host without its trailing dot, an
// IPv4-mapped IPv6 address as IPv4, the port as a number without
// leading zeros and dropped when it is the scheme's default. Nothing is
// resolved (no DNS). The path, query and their case stay as they are.
func Normalize(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", errors.New("is not a URL with a host")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host := canonicalHost(u.Hostname())
	port := u.Port()
	if port != "" {
		if port = canonicalPort(port); port == "-" {
			return "", fmt.Errorf("port %q is not a port number from 1 to 65535", u.Port())
		}
	}
	if port == defaultPorts[u.Scheme] {
		port = ""
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]"
	default:
		u.Host = host
	}
	return u.String(), nil
}

// CheckURL reports why raw may not be an endpoint, naming the problem.
// What it cannot know before connecting (the address a name resolves to)
// is checked again at every connection.
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
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("scheme %q is not https", u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = defaultPorts[u.Scheme]
	}
	if canonicalPort(port) == "-" {
		return fmt.Errorf("port %q is not a port number from 1 to 65535", port)
	}
	if p.allows(host, port) {
		return nil
	}
	switch {
	case p.listsHost(host):
		return fmt.Errorf("port %s of %q is not allowed (the operator allows that host on other ports only)", port, host)
	case u.Scheme == "http":
		return fmt.Errorf("must be https (plain http only for the operator's allowed hosts and ports, and %q is not one)", net.JoinHostPort(host, port))
	}
	if a, err := netip.ParseAddr(host); err == nil && internal(a) {
		return fmt.Errorf("%s is an internal address, not allowed", host)
	}
	return nil
}

// internalPrefixes are address ranges, beside those netip classifies,
// that are not on the public internet.
var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64: embeds an IPv4 address
}

// internal reports whether addr is not on the public internet.
func internal(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsMulticast() || addr.IsUnspecified() || addr.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range internalPrefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// BlockedError is a connection the policy refused: the address dialled is
// internal and neither it nor the endpoint's host is allow-listed on that
// port. Its text names the address, for the worker's log only.
type BlockedError struct {
	// Address is the host:port dialled, after name resolution.
	Address string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("webhook: %s is an internal address and not allow-listed on that port (WEBHOOK_ALLOW_HOSTS)", e.Address)
}

// dialTimeout bounds connecting, name resolution included.
const dialTimeout = 5 * time.Second

// dialContext connects to address (the endpoint's host:port) and checks,
// for every address the name resolves to, just before connecting to it,
// that it is public or allow-listed with its port: a name that resolved
// to a public address when registered and to an internal one now (DNS
// rebinding) is refused. An endpoint whose own host:port is allow-listed
// reaches whatever its name resolves to, on that port.
func (p Policy) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("webhook: dial %s: %w", address, err)
	}
	named := p.allows(host, port)
	d := &net.Dialer{Timeout: dialTimeout, Control: func(_, resolved string, _ syscall.RawConn) error {
		return p.checkDial(named, resolved)
	}}
	return d.DialContext(ctx, network, address)
}

// checkDial is the dialer's check of the resolved address (host:port)
// about to be connected to.
func (p Policy) checkDial(named bool, resolved string) error {
	host, port, err := net.SplitHostPort(resolved)
	if err != nil {
		return &BlockedError{Address: resolved}
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return &BlockedError{Address: resolved}
	}
	if named || !internal(addr) || p.allows(addr.String(), port) {
		return nil
	}
	return &BlockedError{Address: resolved}
}
