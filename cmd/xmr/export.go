package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/finetune"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/outpath"
)

var exportFlags struct {
	checkpoint string
	out        string
	half       bool
}

func init() {
	register(&command{
		name:    "export",
		summary: "write a checkpoint's model for shipping: its weights (in half precision with --half) and what it needs to read features, without the training state",
		usage:   "--checkpoint CKPT --out FILE.safetensors [--half]",
		examples: `  xmr export --checkpoint xmr-photos/run --out photos.safetensors --half
  xmr index --checkpoint photos.safetensors --images my-photos --out my-photos.idx

Keeps the model's weights, its config and vocabulary, the extractor its
features come from and, for a model that fine-tuned the detector, the
detector's part; drops the optimiser state, the averaged weights and the
loss's own parameters, which only training reads. --half stores every
weight in half precision (half the bytes; the scores move by about 1e-3):
the built-in photo model (photomodel/) is such a file.`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&exportFlags.checkpoint, "checkpoint", "", "model checkpoint `CKPT`, or a training run directory (its best-rsum checkpoint)")
			fs.StringVar(&exportFlags.out, "out", "", "the checkpoint `FILE` to write")
			fs.BoolVar(&exportFlags.half, "half", false, "store the weights in half precision (F16)")
		},
		run: runExport,
	})
}

func runExport(ctx context.Context, args []string) error {
	f := exportFlags
	switch {
	case len(args) > 0:
		return usageErrorf("unexpected arguments %q", args)
	case f.checkpoint == "":
		return usageErrorf("--checkpoint is required")
	case f.out == "":
		return usageErrorf("--out is required")
	}
	if err := checkOutputs([]outpath.Input{{Flag: "--checkpoint", Path: f.checkpoint}}, []outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Stream}}); err != nil {
		return err
	}
	m, cf, err := model.Load(f.checkpoint)
	if err != nil {
		return err
	}
	defer cf.Close()
	if err := cf.Verify(); err != nil {
		return err
	}
	part, _, err := finetune.Carried(cf)
	if err != nil {
		return err
	}
	// The metadata travels whole (the extractor, the feature kind, the
	// part's cut, the training config for the record); Save writes the
	// model's own keys and the checksums anew.
	md := cf.Metadata()
	delete(md, checkpoint.MetaChecksums)
	save := model.Save
	if f.half {
		save = model.SaveHalf
	}
	if err := save(f.out, m, part, md); err != nil {
		return err
	}
	prec := "float32"
	if f.half {
		prec = "half precision"
	}
	size := ""
	if st, err := os.Stat(f.out); err == nil && st.Mode().IsRegular() {
		size = fmt.Sprintf(", %.1f MB", float64(st.Size())/1e6)
	}
	fmt.Fprintf(stdout, "wrote %s: %s (%s)%s\n", f.out, m.Name(), prec, size)
	return nil
}
