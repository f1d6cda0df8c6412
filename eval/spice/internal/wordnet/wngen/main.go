// Command wngen generates the compact WordNet table that package wordnet
// embeds, from a WordNet 3.0 dictionary directory (Debian's wordnet-base
// installs one at /usr/share/wordnet). Run it through go generate in
// eval/spice/internal/wordnet:
//
//	go run ./wngen -dict /usr/share/wordnet -out wn30.gz
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/eval/spice/internal/wordnet"
)

func main() {
	dict := flag.String("dict", "", "WordNet dictionary directory (default: search the usual places)")
	out := flag.String("out", "wn30.gz", "output table")
	flag.Parse()
	if err := run(*dict, *out); err != nil {
		fmt.Fprintln(os.Stderr, "wngen:", err)
		os.Exit(1)
	}
}

func run(dict, out string) error {
	dir, err := wordnet.FindDict(dict)
	if err != nil {
		return err
	}
	db, err := wordnet.Parse(dir)
	if err != nil {
		return err
	}
	var n int64
	err = atomicfile.Write(out, func(w io.Writer) error {
		var err error
		n, err = db.WriteTo(w)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("wngen: %s: %d lemmas, %d synsets, %d senses, %d bytes\n", out, db.Len(), db.NumSynsets(), db.NumSenses(), n)
	return nil
}
