package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelpAndUsageErrors(t *testing.T) {
	cases := []struct {
		args       []string
		code       int
		stdout     []string
		stderr     []string
		onceStdout string
	}{
		{[]string{"help"}, 0, []string{"demo", "train", "eval", "synth", "relevance", "bench", "tokenize", "version", "import", "align"}, nil, ""},
		{[]string{"import", "-h"}, 0, []string{"Usage: xmr import", "--from", "Examples:", "bert-base-uncased"}, nil, "Usage: xmr import"},
		{[]string{"align", "-h"}, 0, []string{"Usage: xmr align", "--features", "Examples:"}, nil, "Usage: xmr align"},
		{[]string{"train", "-h"}, 0, []string{"Usage: xmr train", "--time-budget", "Examples:"}, nil, "Usage: xmr train"},
		{[]string{"nosuch"}, 2, nil, []string{`unknown command "nosuch"`}, ""},
		{[]string{"train", "--bogus"}, 2, nil, []string{"bogus", "Usage: xmr train"}, ""},
		{[]string{"train"}, 2, nil, []string{"--out is required"}, ""},
		{[]string{"eval", "--protocol", "2k", "--sims", "x.npy"}, 2, nil, []string{"protocol"}, ""},
		{[]string{"bench", "nosuch"}, 2, nil, []string{`unknown benchmark "nosuch"`, "gemm"}, ""},
		{[]string{"synth", "--out", "unused", "--dim", "0"}, 2, nil, []string{"--dim and --regions must be positive, have 0 and 36"}, ""},
		{[]string{"synth", "--out", "unused", "--regions", "0"}, 2, nil, []string{"--dim and --regions must be positive, have 2048 and 0"}, ""},
		{[]string{"train", "--out", "unused", "--data", ".", "--resume", "--overwrite"}, 2, nil, []string{"--resume and --overwrite exclude each other"}, ""},
		{[]string{"train", "--out", "unused", "--data", ".", "--time-budget", "-1s"}, 2, nil, []string{"--time-budget -1s: want a duration such as 10m, or 0 for no limit"}, ""},
		{[]string{"train", "--out", "unused", "--data", ".", "--max-iters", "-1"}, 2, nil, []string{"--max-iters -1: want a number of iterations, or 0 for the configured epochs"}, ""},
		{[]string{"train", "--out", "unused", "--data", ".", "--val-images", "0"}, 2, nil, []string{"--val-images 0: want a number of dev images, at least 1"}, ""},
		{[]string{"train", "--out", "unused", "--data", ".", "--val-images", "-5"}, 2, nil, []string{"--val-images -5: want a number of dev images, at least 1"}, ""},
		{[]string{"train", "--out", "unused", "--data", ".", "--resume", "--config", ""}, 2, nil, []string{"--config is empty"}, ""},
		{[]string{"train", "--out", "unused", "--data", ".", "--resume", "--config", "teran-mrsw-small", "--bert", "bert-base-uncased"}, 2, nil, []string{"--bert goes with --config, for a new run: a resumed run has its BERT in its checkpoint; drop --bert"}, ""},
		{[]string{"serve", "-h"}, 0, []string{"Usage: xmr serve", "--images", "docs/api.md", "Examples:", "-upload-pixel-budget", "-shutdown-timeout"}, nil, "Usage: xmr serve"},
		{[]string{"serve"}, 2, nil, []string{"--index is required"}, ""},
		{[]string{"serve", "--index", "x", "--addr", "8080"}, 2, nil, []string{`--addr "8080": want host:port`}, ""},
		{[]string{"serve", "--index", "x", "--timeout", "0s"}, 2, nil, []string{"--timeout must be positive"}, ""},
		{[]string{"index", "--checkpoint", "x", "--data", "y", "--out", "z", "--keep-float32", "--compress"}, 2, nil, []string{"--keep-float32 and --compress contradict each other"}, ""},
		{[]string{"serve", "--index", "x", "--max-upload-bytes", "0"}, 2, nil, []string{"--max-upload-bytes must be positive, is 0"}, ""},
		{[]string{"serve", "--index", "x", "--max-upload-bytes", "-1"}, 2, nil, []string{"--max-upload-bytes must be positive, is -1"}, ""},
		{[]string{"serve", "--index", "x", "--upload-pixel-budget", "0"}, 2, nil, []string{"--upload-pixel-budget must be positive, is 0"}, ""},
		{[]string{"serve", "--index", "x", "--upload-pixel-budget", "-5"}, 2, nil, []string{"--upload-pixel-budget must be positive, is -5"}, ""},
		{[]string{"serve", "--index", "x", "--shutdown-timeout", "0s"}, 2, nil, []string{"--shutdown-timeout must be positive, is 0s"}, ""},
		{[]string{"serve", "--index", "x", "--shutdown-timeout", "-1s"}, 2, nil, []string{"--shutdown-timeout must be positive, is -1s"}, ""},
		{[]string{"extract", "--images", "x", "--out", "y", "--workers", "100000"}, 2, nil, []string{"--workers 100000: want 1 to", "per CPU of this machine's"}, ""},
		{[]string{"extract", "--images", "x", "--out", "y", "--workers", "0"}, 2, nil, []string{"--workers 0: want 1 to"}, ""},
		{[]string{"index", "--checkpoint", "x", "--out", "y", "--images", "z", "--workers", "-2"}, 2, nil, []string{"--workers -2: want 1 to"}, ""},
		{[]string{"relevance", "--captions", "x", "--out", "y", "--workers", "-3"}, 2, nil, []string{"--workers -3: want 1 to", "or 0 for one per CPU"}, ""},
		{[]string{"synth", "--out", "unused", "--workers", "100000"}, 2, nil, []string{"--workers 100000: want 1 to"}, ""},
		{[]string{"serve", "--index", "no-such-index"}, 1, nil, []string{"not an xmr index"}, ""},
		{[]string{"index", "-h"}, 0, []string{"Usage: xmr index", "-backend", "-weaviate-url", "-shards", "-replication", "-muvera", "-ef-construction", "docs/weaviate.md"}, nil, "Usage: xmr index"},
		{[]string{"index", "--checkpoint", "x", "--out", "y", "--backend", "weaviate"}, 2, nil, []string{"--backend weaviate needs --weaviate-url"}, ""},
		{[]string{"index", "--checkpoint", "x", "--out", "y", "--backend", "bogus"}, 2, nil, []string{`--backend "bogus": want local or weaviate`}, ""},
		{[]string{"index", "--checkpoint", "x", "--out", "y", "--backend", "weaviate", "--weaviate-url", "http://127.0.0.1:1", "--append"}, 2, nil, []string{"--append is for the local index"}, ""},
		{[]string{"index", "--checkpoint", "x", "--out", "y", "--weaviate-url", "http://127.0.0.1:1"}, 2, nil, []string{"--weaviate-url needs --backend weaviate"}, ""},
		{[]string{"search", "--index", "no-such-index", "--text", "a", "--weaviate-url", "http://127.0.0.1:1"}, 2, nil, []string{"is not a Weaviate-backed index"}, ""},
		{[]string{"search", "-h"}, 0, []string{"-weaviate-url", "docs/weaviate.md"}, nil, "Usage: xmr search"},
		{[]string{"demo", "--n", "50"}, 2, nil, []string{"--n must be at least 200"}, ""},
		{[]string{"demo", "--max-iters", "0"}, 2, nil, []string{"--max-iters 0 trains until --time-budget, which is 0"}, ""},
		{[]string{"demo", "--max-iters", "-1"}, 2, nil, []string{"--max-iters must be positive (or 0 with --time-budget), is -1"}, ""},
		{[]string{"demo", "--time-budget", "-1s"}, 2, nil, []string{"--time-budget must be positive or 0 (no limit), is -1s"}, ""},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runMain(c.args, &out, &errb)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, errb.String())
			}
			for _, w := range c.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
			if c.onceStdout != "" && (strings.Count(out.String(), c.onceStdout) != 1 || errb.Len() != 0) {
				t.Errorf("help printed %d times on stdout and %d bytes on stderr", strings.Count(out.String(), c.onceStdout), errb.Len())
			}
		})
	}
}
