package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
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
	// byQuery counts the round trips by the start of the statement they
	// ran (-v prints the most frequent), under mu.
	byQuery map[string]int64
	wg      sync.WaitGroup
}

func startPGProxy(target string) (*pgProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("postgres proxy: listen: %w", err)
	}
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, byQuery: map[string]int64{}}
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
	_ = countFrontend(client, server, func(query string) {
		p.roundTrips.Add(1)
		p.mu.Lock()
		p.byQuery[query]++
		p.mu.Unlock()
	})
	_ = server.Close()
	<-done
}

// queries returns the round trips counted since the last call, by the
// start of their statement, and starts counting afresh.
func (p *pgProxy) queries() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.byQuery
	p.byQuery = map[string]int64{}
	return out
}

// queryHead is how much of a statement names it in the breakdown.
const queryHead = 70

// countFrontend copies the frontend protocol from r to w, calling
// roundTrip for every Sync ('S') and simple Query ('Q') message with the
// start of the statement it ran (the last Bind's prepared statement, as
// its Parse named it). Writes are flushed whenever no more input is
// buffered, so a pipelined batch stays one write.
func countFrontend(r io.Reader, w io.Writer, roundTrip func(query string)) error {
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
	stmts := map[string]string{} // prepared statements by name
	bound := ""                  // the statement of the exchange in flight
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
		// The statement's names and text, peeked before the body is
		// copied on.
		var peek []byte
		if hdr[0] == 'P' || hdr[0] == 'B' || hdr[0] == 'Q' {
			peek, _ = br.Peek(min(n-4, 4096))
		}
		switch hdr[0] {
		case 'P':
			if name, rest, ok := bytes.Cut(peek, []byte{0}); ok {
				query, _, _ := bytes.Cut(rest, []byte{0})
				stmts[string(name)] = head(query)
				if len(name) == 0 {
					bound = stmts[""]
				}
			}
		case 'B':
			if _, rest, ok := bytes.Cut(peek, []byte{0}); ok {
				name, _, _ := bytes.Cut(rest, []byte{0})
				bound = stmts[string(name)]
			}
		}
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(bw, br, int64(n-4)); err != nil {
			return err
		}
		switch hdr[0] {
		case 'S':
			roundTrip(bound)
			bound = ""
		case 'Q':
			q, _, _ := bytes.Cut(peek, []byte{0})
			roundTrip(head(q))
		}
		if err := flush(); err != nil {
			return err
		}
	}
}

// head is the start of a statement, its white space folded.
func head(query []byte) string {
	q := strings.Join(strings.Fields(string(query)), " ")
	if len(q) > queryHead {
		q = q[:queryHead]
	}
	return q
}
