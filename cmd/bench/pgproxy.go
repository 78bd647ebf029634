package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Frontend protocol codes of the untyped messages a client may send before
// its startup message.
const (
	pgSSLRequest    = 80877103
	pgGSSENCRequest = 80877104
	pgCancelRequest = 80877102
	// pgMaxMessage bounds one frontend message; the store never sends
	// anything near it, so a larger length means a broken stream.
	pgMaxMessage = 1 << 30
)

// pgProxy is a TCP proxy in front of Postgres that counts round trips: it
// reads the frontend (client to server) protocol, and every Sync (the end
// of an extended-protocol exchange, one per pgx query or batch) or simple
// Query message is one round trip the client waits for.
type pgProxy struct {
	ln         net.Listener
	target     string
	roundTrips atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startPGProxy(target string) (*pgProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("postgres proxy: listen: %w", err)
	}
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *pgProxy) addr() string { return p.ln.Addr().String() }

// close stops accepting and cuts every open connection.
func (p *pgProxy) close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *pgProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *pgProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *pgProxy) handle(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		_ = client.Close()
		_ = server.Close()
		p.track(client, false)
		p.track(server, false)
	}()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(client, server)
		_ = client.Close()
		close(done)
	}()
	_ = countFrontend(client, server, func() { p.roundTrips.Add(1) })
	_ = server.Close()
	<-done
}

// countFrontend copies the frontend protocol from r to w, calling
// roundTrip for every Sync ('S') and simple Query ('Q') message. Writes
// are flushed whenever no more input is buffered, so a pipelined batch
// stays one write.
func countFrontend(r io.Reader, w io.Writer, roundTrip func()) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	var hdr [5]byte
	flush := func() error {
		if br.Buffered() == 0 {
			return bw.Flush()
		}
		return nil
	}
	// Startup phase: untyped messages (length, then a code) until the
	// startup message itself.
	for {
		if _, err := io.ReadFull(br, hdr[:4]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < 8 || n > pgMaxMessage {
			return fmt.Errorf("postgres proxy: startup message length %d", n)
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(br, body); err != nil {
			return err
		}
		if _, err := bw.Write(hdr[:4]); err != nil {
			return err
		}
		if _, err := bw.Write(body); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		code := binary.BigEndian.Uint32(body[:4])
		if code == pgSSLRequest || code == pgGSSENCRequest {
			continue
		}
		if code == pgCancelRequest {
			return nil
		}
		break
	}
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return bw.Flush()
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		if n < 4 || n > pgMaxMessage {
			return fmt.Errorf("postgres proxy: message %q length %d", hdr[0], n)
		}
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(bw, br, int64(n-4)); err != nil {
			return err
		}
		if hdr[0] == 'S' || hdr[0] == 'Q' {
			roundTrip()
		}
		if err := flush(); err != nil {
			return err
		}
	}
}
