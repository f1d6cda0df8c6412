package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/xmr-project/xmr/data"
)

// dataFlags are the flags that say where a dataset is and in what format:
// --data, --format, --karpathy, --sizes, --coco-annotations and --ids. A
// command embeds one in its flag struct, declares them with addTo and
// builds the data.Source with source.
type dataFlags struct {
	path     string
	format   string
	karpathy string
	sizes    string
	cocoAnns []string
	ids      string
}

// addTo declares the flags on fs, with their defaults.
func (f *dataFlags) addTo(fs *flag.FlagSet) {
	f.cocoAnns = nil
	fs.StringVar(&f.path, "data", "", "dataset `PATH`: a precomp directory, a bottom-up directory (bu_att/, bu_box/), or bottom-up TSV data (a .tsv file, a directory of them, or a quoted glob such as 'feats/*.tsv.*')")
	fs.StringVar(&f.format, "format", "auto", "dataset format: auto (detect from the files), precomp, bottomup or tsv")
	fs.StringVar(&f.karpathy, "karpathy", "", "Karpathy split `FILE` (dataset_coco.json, ...) for bottomup and tsv data (default: the one dataset_*.json in the data directory)")
	fs.StringVar(&f.sizes, "sizes", "", "image sizes `FILE` (lines \"id width height\") to normalise bottomup pixel boxes")
	fs.Func("coco-annotations", "COCO caption annotation `FILES` (captions_train2014.json,captions_val2014.json; comma-separated or repeated) giving the image sizes of bottomup COCO data", func(v string) error {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				f.cocoAnns = append(f.cocoAnns, p)
			}
		}
		return nil
	})
	fs.StringVar(&f.ids, "ids", "auto", "Karpathy field that names the bottomup files or TSV records: auto, cocoid, imgid or filename")
}

// source checks the flags, resolves the dataset (detects its format,
// finds and parses the Karpathy file) and returns it. Errors that another
// flag resolves say which.
func (f *dataFlags) source() (data.Source, error) {
	if f.path == "" {
		return data.Source{}, usageErrorf("--data is required")
	}
	format, err := data.ParseFormat(f.format)
	if err != nil {
		return data.Source{}, usageErrorf("--format: %v", err)
	}
	ids, err := data.ParseIDScheme(f.ids)
	if err != nil {
		return data.Source{}, usageErrorf("--ids: %v", err)
	}
	src := data.Source{
		Format:          format,
		Path:            f.path,
		KarpathyFile:    f.karpathy,
		SizesFile:       f.sizes,
		COCOAnnotations: f.cocoAnns,
		IDs:             ids,
	}
	r, err := src.Resolve()
	switch {
	case errors.Is(err, data.ErrFormatUnknown):
		return data.Source{}, fmt.Errorf("%w; check --data, or pass --format precomp, bottomup or tsv", err)
	case errors.Is(err, data.ErrKarpathyUnknown):
		return data.Source{}, fmt.Errorf("%w; pass --karpathy FILE (dataset_coco.json, dataset_flickr30k.json, ... from Karpathy's caption_datasets.zip)", err)
	}
	return r, err
}

// args returns the flags that select the same dataset again, as a command
// line would give them (defaults left out).
func (f *dataFlags) args() []string {
	args := []string{"--data", f.path}
	if f.format != "" && f.format != "auto" {
		args = append(args, "--format", f.format)
	}
	if f.karpathy != "" {
		args = append(args, "--karpathy", f.karpathy)
	}
	if f.sizes != "" {
		args = append(args, "--sizes", f.sizes)
	}
	if len(f.cocoAnns) > 0 {
		args = append(args, "--coco-annotations", strings.Join(f.cocoAnns, ","))
	}
	if f.ids != "" && f.ids != "auto" {
		args = append(args, "--ids", f.ids)
	}
	return args
}

// commandLine is shellJoin for a command that xmr suggests: a first
// argument "xmr" becomes the binary as the user ran it (bin/xmr after the
// README's build, xmr from PATH), so that the line can be pasted as it is.
func commandLine(args []string) string {
	if len(args) > 0 && args[0] == "xmr" {
		args = append([]string{invokedAs(os.Args[0])}, args[1:]...)
	}
	return shellJoin(args)
}

// invokedAs returns how arg0, the program's os.Args[0], names the binary
// to a shell: as typed, except for a binary that go run or go test built
// in a temporary directory, which the user cannot run again, named xmr.
func invokedAs(arg0 string) string {
	if arg0 == "" || strings.HasSuffix(arg0, ".test") || strings.Contains(arg0, "go-build") {
		return "xmr"
	}
	return arg0
}

// shellJoin joins args into a line that a POSIX shell splits back into
// them: arguments with characters the shell treats specially are quoted.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./,:=+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
