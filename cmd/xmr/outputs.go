package main

import (
	"github.com/xmr-project/xmr/outpath"
)

// checkOutputs applies package outpath's rule before a command does any
// work: no output may be, or lie in, one of the command's inputs, and an
// existing output must be what the command writes (a FIFO or a terminal
// only where the output may be a stream). A refusal is a usage error
// naming both flags.
func checkOutputs(inputs []outpath.Input, outputs []outpath.Output) error {
	if err := outpath.Check(inputs, outputs); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// inputs returns the files and directories that the data flags name.
func (f *dataFlags) inputs() []outpath.Input {
	in := []outpath.Input{{Flag: "--data", Path: f.path}, {Flag: "--karpathy", Path: f.karpathy}, {Flag: "--sizes", Path: f.sizes}}
	for _, a := range f.cocoAnns {
		in = append(in, outpath.Input{Flag: "--coco-annotations", Path: a})
	}
	return in
}

// profileOutput is the --cpuprofile output of a command: a file, or a FIFO
// or terminal written as a stream.
func profileOutput(path string) outpath.Output {
	return outpath.Output{Flag: "--cpuprofile", Path: path, Kind: outpath.Stream}
}

// checkpointInputs returns the --checkpoint inputs, files or run
// directories.
func checkpointInputs(paths ...string) []outpath.Input {
	var in []outpath.Input
	for _, p := range paths {
		in = append(in, outpath.Input{Flag: "--checkpoint", Path: p})
	}
	return in
}
