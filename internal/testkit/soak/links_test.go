package soak

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves a line echo on a free port.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line on c and reports whether it came back within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) bool {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := r.ReadString('\n')
	return err == nil && line == "ping\n"
}

// A partition holds the bytes of an open connection (a silent network,
// not a refused one) and lifting it lets them through; latency delays.
func TestLinkPartitionAndLatency(t *testing.T) {
	l := newLinks()
	defer l.close()
	addr, err := l.add("test", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if !roundTrip(c, r, 2*time.Second) {
		t.Fatal("no echo through the proxy")
	}

	if err := l.toxic("test", "p", "timeout", "", map[string]any{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	if roundTrip(c, r, 500*time.Millisecond) {
		t.Fatal("the partition let bytes through")
	}
	l.clear("test", "p")
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	if !roundTrip(c2, r2, 2*time.Second) {
		t.Fatal("no echo after the partition was lifted")
	}

	if err := l.toxic("test", "lat", "latency", "", map[string]any{"latency": 300, "jitter": 0}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if !roundTrip(c2, r2, 5*time.Second) {
		t.Fatal("no echo under latency")
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("round trip %s under 300 ms latency each way", d)
	}
	l.reset()
	start = time.Now()
	if !roundTrip(c2, r2, 2*time.Second) || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("latency still on after reset (%s)", time.Since(start))
	}
}
