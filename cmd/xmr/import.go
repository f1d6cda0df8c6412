package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/outpath"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/torchfile"
	"github.com/xmr-project/xmr/train"
)

var importFlags struct {
	from, bert, vocab, config string
	modelName, pooling        string
	out                       string
	overwrite                 bool
}

func init() {
	register(&command{
		name:    "import",
		summary: "convert an official TERAN/TERN PyTorch checkpoint, or a HuggingFace BERT, into an xmr checkpoint",
		usage:   "--from CHECKPOINT.pth (--bert DIR | --vocab vocab.txt) --out FILE.safetensors\n       xmr import --bert DIR --config CONFIG --out FILE.safetensors",
		examples: `  # An official checkpoint (mesnico/TERAN, mesnico/TERN): the BERT it was
  # trained from gives the vocabulary and BERT's heads.
  xmr import --from model_best_rsum.pth.tar --bert bert-base-uncased --out teran.safetensors
  xmr eval --checkpoint teran.safetensors --data data/coco_precomp --split testall --protocol 1k
  xmr index --checkpoint teran.safetensors --data data/coco_precomp --split testall --out coco5k.idx
  xmr align --checkpoint teran.safetensors --features img.npy --boxes boxes.npy --image img.jpg --text "a dog on a couch" --out align.png

  # A file without the official config (a bare state dict) says which model it is.
  xmr import --from state_dict.pth --model tern --vocab vocab.txt --out tern.safetensors

  # A new, untrained model of a config whose text encoder is a pretrained
  # BERT (config.json, vocab.txt, model.safetensors or pytorch_model.bin);
  # to train from it, use xmr train --config CONFIG --bert DIR.
  xmr import --bert bert-base-uncased --config teran-mrsw --out teran-init.safetensors

The file is read without running any of its code: only tensors, storages,
dicts, lists and plain values are unpickled (docs/import.md). Every shape
is checked; tensors the official modules have and xmr's do not use are
listed, unknown and missing ones are an error that names all of them. The
output is written atomically and loads in xmr eval, index, search and align.`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&importFlags.from, "from", "", "official TERAN/TERN checkpoint written by torch.save (zip, legacy or tar format)")
			fs.StringVar(&importFlags.bert, "bert", "", "HuggingFace BERT `DIR`: with --from, its vocab.txt and config.json; alone, the text encoder of a new model of --config")
			fs.StringVar(&importFlags.vocab, "vocab", "", "BERT vocab.txt, when --from is given without --bert")
			fs.StringVar(&importFlags.config, "config", "", "with --bert alone: the model's YAML config (a file or a built-in name)")
			fs.StringVar(&importFlags.modelName, "model", "", "teran or tern, overriding the checkpoint's config (required when it has none)")
			fs.StringVar(&importFlags.pooling, "pooling", "", "alignment pooling (MrSw, MwSr, Symm, MrAvgw), overriding the checkpoint's training.alignment-mode")
			fs.StringVar(&importFlags.out, "out", "", "xmr checkpoint to write (safetensors)")
			fs.BoolVar(&importFlags.overwrite, "overwrite", false, "replace --out if it exists")
		},
		run: runImport,
	})
}

func runImport(ctx context.Context, args []string) error {
	f := importFlags
	switch {
	case len(args) > 0:
		return usageErrorf("unexpected arguments %q", args)
	case f.out == "":
		return usageErrorf("--out is required")
	case f.from == "" && f.bert == "":
		return usageErrorf("give --from (an official checkpoint) or --bert with --config (a new model with a pretrained BERT)")
	case f.from != "" && f.config != "":
		return usageErrorf("--config goes with --bert alone; an official checkpoint brings its own config")
	case f.from == "" && f.config == "":
		return usageErrorf("--bert without --from needs --config: the model to put the BERT into")
	case f.from == "" && (f.modelName != "" || f.pooling != "" || f.vocab != ""):
		return usageErrorf("--model, --pooling and --vocab go with --from")
	}
	if err := checkOutputs([]outpath.Input{{Flag: "--from", Path: f.from}, {Flag: "--bert", Path: f.bert}, {Flag: "--vocab", Path: f.vocab}, {Flag: "--config", Path: f.config}},
		[]outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Stream}}); err != nil {
		return err
	}
	// A FIFO or a terminal is written to, not replaced.
	if st, err := os.Stat(f.out); err == nil && !f.overwrite && !atomicfile.IsStream(st) {
		return fmt.Errorf("%s already exists: give --overwrite to replace it", f.out)
	}
	var m model.Model
	var err error
	if f.from != "" {
		m, err = importFromOfficial(f.from)
	} else {
		m, err = importBERT(f.bert, f.config)
	}
	if err != nil {
		return err
	}
	if err := model.Save(f.out, m, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", f.out)
	return nil
}

// importFromOfficial is xmr import --from: it reads the checkpoint with
// the vocabulary and BERT config the flags name and prints the report.
func importFromOfficial(from string) (model.Model, error) {
	f := importFlags
	o := model.OfficialOptions{Model: f.modelName}
	if f.pooling != "" {
		s, err := model.ParseScoring(f.pooling)
		if err != nil || !s.Alignment() {
			return nil, usageErrorf("--pooling %q: want MrSw, MwSr, Symm or MrAvgw", f.pooling)
		}
		o.Pooling = s
	}
	if f.modelName != "" && f.modelName != "teran" && f.modelName != "tern" {
		return nil, usageErrorf("--model %q: want teran or tern", f.modelName)
	}
	vocabPath := f.vocab
	if f.bert != "" {
		cfg, err := model.ReadBERTConfig(f.bert)
		if err != nil {
			return nil, err
		}
		o.BERT = &cfg
		if vocabPath == "" {
			vocabPath = filepath.Join(f.bert, "vocab.txt")
		}
	}
	if vocabPath == "" {
		return nil, usageErrorf("official checkpoints hold no vocabulary: give --bert DIR (the BERT the model was trained from, e.g. bert-base-uncased) or --vocab vocab.txt")
	}
	v, err := text.LoadVocab(vocabPath)
	if err != nil {
		return nil, err
	}
	o.Vocab = v
	m, rep, format, err := importCheckpoint(from, o)
	if err != nil {
		return nil, err
	}
	printImport(from, format, m, rep)
	return m, nil
}

// importCheckpoint reads an official checkpoint file and builds its xmr
// model; format is the file's torch.save format.
func importCheckpoint(path string, o model.OfficialOptions) (m model.Model, rep *model.ImportReport, format string, err error) {
	f, err := torchfile.Open(path)
	if err != nil {
		return nil, nil, "", err
	}
	defer f.Close()
	m, rep, err = model.ImportOfficial(f, o)
	return m, rep, f.Format, err
}

func printImport(from, format string, m model.Model, rep *model.ImportReport) {
	c := rep.Config
	shared := "separate"
	if c.Model.SharedTransformer {
		shared = "shared"
	}
	fmt.Fprintf(stdout, "imported %s from %s (%s format): %d tensors\n", m.Name(), from, format, rep.Tensors)
	fmt.Fprintf(stdout, "  BERT: %d layers, %d wide, %d heads, %d positions, %d tokens\n", c.TextModel.ExtractionHiddenLayer, c.TextModel.WordDim,
		c.TextModel.Heads, c.TextModel.MaxPositions, c.TextModel.VocabSize)
	fmt.Fprintf(stdout, "  regions: %d-d features, %d reasoning layers, %d wide\n", c.ImageModel.FeatDim, c.ImageModel.TransformerLayers, c.ImageModel.Hidden)
	fmt.Fprintf(stdout, "  common space: %d-d, %d final layers (%s)", c.Model.EmbedSize, c.Model.Layers, shared)
	if m.Name() == "teran" {
		fmt.Fprintf(stdout, ", pooling %s", c.Pooling)
	}
	fmt.Fprintln(stdout)
	for _, n := range rep.Notes {
		fmt.Fprintf(stdout, "  note: %s\n", n)
	}
	if len(rep.Ignored) > 0 {
		fmt.Fprintf(stdout, "  not used by xmr (%d tensors):\n", len(rep.Ignored))
		for _, n := range rep.Ignored {
			fmt.Fprintf(stdout, "    %s\n", n)
		}
	}
}

// importBERT builds a new model of the config at cfgPath whose text
// encoder is the pretrained BERT of dir.
func importBERT(dir, cfgPath string) (model.Model, error) {
	tc, err := train.LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	cfg := tc.ModelConfig()
	if cfg.TextModel.Name != "bert" {
		return nil, fmt.Errorf("config %s: text-model.name is %q: a pretrained BERT goes into a bert text model", cfgPath, cfg.TextModel.Name)
	}
	cfg.TextModel.Pretrain = dir
	tok, err := model.BuildTokenizer(cfg, nil)
	if err != nil {
		return nil, err
	}
	m, err := model.New(cfg, tok, tc.Training.Seed)
	if err != nil {
		return nil, err
	}
	mc := m.Config()
	fmt.Fprintf(stdout, "a new %s with the BERT of %s (%d layers, %d wide, %d tokens); the rest is untrained: train it with\n  xmr train --config %s --bert %s ...\n",
		m.Name(), dir, mc.TextModel.ExtractionHiddenLayer, mc.TextModel.WordDim, mc.TextModel.VocabSize, cfgPath, strings.TrimRight(dir, "/"))
	return m, nil
}
