package tokens

import (
	"fmt"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

func TestProbe3(t *testing.T) {
	for _, e := range []tokenizer.Encoding{tokenizer.Cl100kBase, tokenizer.O200kBase} {
		c, _ := tokenizer.Get(e)
		for _, s := range []string{"today\n \n", "today\n  \n", "today\n ", "rer", "'rer", " \u00850", "a\n \n \n \nb", " \n \n"} {
			ids, toks, _ := c.Encode(s)
			fmt.Printf("%s %q %v %q\n", e, s, ids, toks)
		}
	}
}
