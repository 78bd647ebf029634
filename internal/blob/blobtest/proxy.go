package blobtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of an S3 server, for fault
// tests: Down makes the server unreachable (new connections are refused and
// open ones are cut), Up makes it reachable again on the same address.
type Proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener // nil while down or closed
	conns map[net.Conn]struct{}
	shut  bool
	wg    sync.WaitGroup
}

// NewProxy starts a proxy on a free 127.0.0.1 port forwarding to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Endpoint returns the proxy's base URL for blob.Config.Endpoint.
func (p *Proxy) Endpoint() string { return "http://" + p.addr }

// Down stops accepting connections (clients get "connection refused") and
// closes every open one, as when the server crashes. It is a no-op if the
// proxy is already down.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.downLocked()
}

func (p *Proxy) downLocked() {
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Up accepts connections again on the same address. It fails if the port
// was taken meanwhile or the proxy is closed; it is a no-op if already up.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shut {
		return errors.New("proxy: closed")
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy: listen again on %s: %w", p.addr, err)
	}
	p.serveLocked(ln)
	return nil
}

// Close takes the proxy down for good and waits for its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.shut = true
	p.downLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return // listener closed by Down or Close
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(ln, client)
			}()
		}
	}()
}

// pipe forwards one client connection to the target until either side
// closes or the proxy goes down.
func (p *Proxy) pipe(ln net.Listener, client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln {
		// Went down between Accept and here: behave as if never accepted.
		p.mu.Unlock()
		_ = client.Close()
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
