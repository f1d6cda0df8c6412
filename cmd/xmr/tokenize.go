package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/xmr-project/xmr/text"
)

var tokenizeFlags struct {
	vocab string
	ids   bool
}

func init() {
	register(&command{
		name:    "tokenize",
		summary: "print the BERT WordPiece tokens (or ids) of each line of stdin",
		usage:   "--vocab vocab.txt [--ids] < captions.txt",
		examples: `  # One output line per input line, tokens without [CLS]/[SEP]; an empty
  # line gives an empty line.
  echo "A man riding a horse on the beach." | xmr tokenize --vocab bert-base-uncased/vocab.txt
  echo "Skateboarding!" | xmr tokenize --vocab vocab.txt          # skate ##boarding !
  echo "Hello, my dog is cute" | xmr tokenize --vocab vocab.txt --ids   # 7592 1010 2026 3899 2003 10140
  xmr tokenize --vocab vocab.txt < data/coco/test_caps.txt > test_caps.tok`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&tokenizeFlags.vocab, "vocab", "", "WordPiece vocabulary, one token per line (HuggingFace vocab.txt); required")
			fs.BoolVar(&tokenizeFlags.ids, "ids", false, "print token ids instead of tokens")
		},
		run: runTokenize,
	})
}

func runTokenize(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q; the text comes on stdin", args)
	}
	if tokenizeFlags.vocab == "" {
		return usageErrorf("--vocab is required")
	}
	wp, err := text.LoadWordPiece(tokenizeFlags.vocab)
	if err != nil {
		return err
	}
	return tokenizeStream(ctx, wp, os.Stdin, stdout, tokenizeFlags.ids)
}

// tokenizeStream writes the WordPiece tokens (or ids) of each line of r to
// w, one line out per line in. A final line without a newline is
// tokenized too. It checks ctx between lines.
func tokenizeStream(ctx context.Context, wp *text.WordPiece, r io.Reader, w io.Writer, ids bool) error {
	br := bufio.NewReaderSize(r, 1<<20)
	bw := bufio.NewWriterSize(w, 1<<20)
	var idBuf, wordBuf []int32
	var out []byte
	for lineNo := 1; ; lineNo++ {
		if lineNo%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read stdin line %d: %w", lineNo, err)
		}
		if line == "" && err != nil {
			break
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		idBuf, wordBuf = wp.AppendTokenize(idBuf[:0], wordBuf[:0], line)
		out = out[:0]
		for i, id := range idBuf {
			if i > 0 {
				out = append(out, ' ')
			}
			if ids {
				out = strconv.AppendInt(out, int64(id), 10)
			} else {
				out = append(out, wp.Vocab().Token(id)...)
			}
		}
		out = append(out, '\n')
		if _, werr := bw.Write(out); werr != nil {
			return fmt.Errorf("write stdout: %w", werr)
		}
		if err != nil {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return nil
}
