package main

import (
	"flag"

	"github.com/xmr-project/xmr/model"
)

// The --compat flags of xmr index and xmr search, which only refuse: see
// refuseCompat.
var indexCompat, searchCompat string

// addCompatRefusal registers --compat on fs, into v, for a command that
// cannot score as the official evaluation does.
func addCompatRefusal(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "compat", "", "not supported here (an error): the index scores with its own kernels; the official TERAN evaluation's scores are xmr eval --compat official's")
}

// refuseCompat returns the usage error of --compat v on command cmd (index
// or search), nil when v is empty or none. xmr search ranks with the
// index's kernels (4-bit PQ and int8 codes, the inverted file's pruning,
// float32 re-ranking, Weaviate's maxSim), none of which leaves out the last
// token or applies the zero floors of the official evaluation's padding;
// an index holds vectors, not a scoring convention. So the flag is refused
// rather than half applied.
func refuseCompat(cmd, v string) error {
	c, err := model.ParseCompat(v)
	if err != nil {
		return usageErrorf("--compat: %v", err)
	}
	if c == model.CompatNone {
		return nil
	}
	return usageErrorf("--compat %s: xmr %s does not score as the official TERAN evaluation: the index ranks with its own kernels (PQ and int8 codes, the inverted file, float32 re-ranking, Weaviate's maxSim), which neither leave out the last token before [SEP] nor floor at 0 as the official padding does; xmr eval --checkpoint CKPT --compat %s gives the official evaluation's scores", c, cmd, c)
}
