package tokens

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

func BenchmarkProbe(b *testing.B) {
	rb := make([]byte, 750000)
	rand.Read(rb)
	b64 := base64.StdEncoding.EncodeToString(rb)
	gens := []struct {
		name string
		g    func(n int) string
	}{
		{"x", func(n int) string { return strings.Repeat("x", n) }},
		{"X", func(n int) string { return strings.Repeat("X", n) }},
		{"space", func(n int) string { return strings.Repeat(" ", n) + "x" }},
		{"nl", func(n int) string { return strings.Repeat("\n", n) }},
		{"spnl", func(n int) string { return strings.Repeat(" \n", n/2) }},
		{"b64", func(n int) string { return b64[:n] }},
		{"digits", func(n int) string { return strings.Repeat("7", n) }},
		{"Aa1", func(n int) string { return strings.Repeat("Aa1 ", n/4) }},
	}
	for _, enc := range []string{O200kBase, Cl100kBase} {
		c, _ := New(enc)
		for _, g := range gens {
			for _, n := range []int{8000, 32000} {
				s := g.g(n)
				b.Run(fmt.Sprintf("%s/%s/%d", enc, g.name, n), func(b *testing.B) {
					b.SetBytes(int64(len(s)))
					for b.Loop() {
						c.Count(s)
					}
				})
			}
		}
	}
}
