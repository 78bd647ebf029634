package blobtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of an S3 server, for fault
// tests: Down makes the server unreachable (new connections are reset at
// once and open ones are cut), Up makes it reachable again. The proxy keeps
// its port while down, so that no other process can take it meanwhile and
// Up always comes back on the same address.
type Proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener // nil once closed
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy on a free 127.0.0.1 port forwarding to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Endpoint returns the proxy's base URL for blob.Config.Endpoint.
func (p *Proxy) Endpoint() string { return "http://" + p.addr }

// Down makes the server unreachable, as when it crashes: every open
// connection is cut and new ones are reset. It is a no-op if the proxy is
// already down.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	p.cutLocked()
}

func (p *Proxy) cutLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Up makes the server reachable again on the same address. It fails if
// the proxy is closed; it is a no-op if already up.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return errors.New("proxy: closed")
	}
	p.down = false
	return nil
}

// Close takes the proxy down for good, releases its port and waits for
// its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.down = true
	p.cutLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// accept serves connections until the listener is closed; while down,
// each is reset at once.
func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return // listener closed by Close
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			reset(client)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(client)
		}()
	}
}

// reset closes a connection with a TCP reset rather than a clean close, as
// a crashed server's kernel answers.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// pipe forwards one client connection to the target until either side
// closes or the proxy goes down.
func (p *Proxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		// Went down between Accept and here: behave as if never accepted.
		p.mu.Unlock()
		reset(client)
		_ = server.Close()
		return
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	// One direction ended: tear down both so the other copy returns too.
	_ = client.Close()
	_ = server.Close()
	<-done

	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
