package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// links are the Toxiproxy proxies between the product's processes and
// their dependencies: one per (side, dependency), e.g. "worker-pg" or
// "api-temporal". Toxiproxy runs in this process through its Go API (no
// HTTP control plane), so a fault is a function call and cannot be lost
// on the way.
type links struct {
	server *toxiproxy.ApiServer

	mu      sync.Mutex
	proxies map[string]*toxiproxy.Proxy
}

func newLinks() *links {
	// The toxics log through zerolog's global logger, at trace level by
	// default: a line per cut connection would bury the soak's own log.
	zerolog.SetGlobalLevel(zerolog.ErrorLevel)
	return &links{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		proxies: map[string]*toxiproxy.Proxy{},
	}
}

// add starts a proxy to upstream on a free loopback port and returns its
// address.
func (l *links) add(name, upstream string) (string, error) {
	p := toxiproxy.NewProxy(l.server, name, "127.0.0.1:0", upstream)
	if err := l.server.Collection.Add(p, true); err != nil {
		return "", fmt.Errorf("proxy %s: %w", name, err)
	}
	l.mu.Lock()
	l.proxies[name] = p
	l.mu.Unlock()
	return p.Listen, nil
}

// setUpstream points a proxy at a new address: versitygw picks a new port
// on each start. Open connections are cut, as a restart cuts them anyway.
func (l *links) setUpstream(name, upstream string) error {
	l.mu.Lock()
	p := l.proxies[name]
	l.mu.Unlock()
	in := toxiproxy.NewProxy(l.server, name, p.Listen, upstream)
	in.Enabled = true
	return p.Update(in)
}

// names lists the proxies.
func (l *links) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for n := range l.proxies {
		out = append(out, n)
	}
	return out
}

// toxic adds a toxic of kind typ on link (both directions when stream is
// ""), named so that it can be removed; attrs are its attributes.
func (l *links) toxic(link, name, typ, stream string, attrs map[string]any) error {
	l.mu.Lock()
	p := l.proxies[link]
	l.mu.Unlock()
	streams := []string{"upstream", "downstream"}
	if stream != "" {
		streams = []string{stream}
	}
	for _, s := range streams {
		body, err := json.Marshal(map[string]any{"name": name + "-" + s, "type": typ, "stream": s, "toxicity": 1.0, "attributes": attrs})
		if err != nil {
			return err
		}
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			return fmt.Errorf("toxic %s on %s: %w", name, link, err)
		}
	}
	return nil
}

// clear removes every toxic named name from link (either direction).
func (l *links) clear(link, name string) {
	l.mu.Lock()
	p := l.proxies[link]
	l.mu.Unlock()
	for _, s := range []string{"upstream", "downstream"} {
		_ = p.Toxics.RemoveToxic(context.Background(), name+"-"+s)
	}
}

// reset removes every toxic of every link.
func (l *links) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		p.Toxics.ResetToxics(context.Background())
	}
}

// close stops every proxy.
func (l *links) close() { _ = l.server.Collection.Clear() }
