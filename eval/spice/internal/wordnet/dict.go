package wordnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/internal/infile"
)

// Synset offsets of the roots of the animate flag in data.noun (WordNet 3.0).
const (
	personOffset = 7846  // person.n.01
	animalOffset = 15388 // animal.n.01
)

// posFiles maps a POS to the suffix of its index, data and exception files.
var posFiles = [NumPOS]string{Noun: "noun", Verb: "verb", Adj: "adj", Adv: "adv"}

// FindDict returns the first directory among the usual places that holds a
// WordNet dictionary (a file index.noun): dir itself when not empty, then
// /usr/share/wordnet, /usr/share/wordnet/dict, /usr/local/WordNet-3.0/dict.
func FindDict(dir string) (string, error) {
	cands := []string{"/usr/share/wordnet", "/usr/share/wordnet/dict", "/usr/local/WordNet-3.0/dict", "/usr/local/share/wordnet"}
	if dir != "" {
		cands = []string{dir, filepath.Join(dir, "dict")}
	}
	for _, c := range cands {
		if st, err := os.Stat(filepath.Join(c, "index.noun")); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("wordnet: no dictionary (index.noun) in %s", strings.Join(cands, ", "))
}

// Parse reads a WordNet 3.0 dictionary directory: index.{noun,verb,adj,adv}
// and {noun,verb,adj,adv}.exc are required; cntlist.rev (frequencies) and
// data.{noun,verb,adj,adv} (the animate flag, and checks) are used when
// present.
//
// The files cross-check each other, so that one cut short at a line
// boundary, which parses, is an error naming it rather than a silently
// different table: every offset in index.POS must start a synset line of
// data.POS (each names its own byte offset first, which is checked too),
// every word of every synset there must have an entry in index.POS naming
// that synset, and cntlist.rev must hold a count for every sense that
// index.POS says was tagged (tagsense_cnt). A cut .exc file is not
// detected: nothing else refers to its entries.
func Parse(dir string) (*DB, error) {
	var raw []indexEntry
	offsets := [NumPOS]map[uint32]bool{}
	// last is the last entry of each index file, for the errors that say
	// it may be cut short.
	type lastEntry struct {
		lemma string
		line  int
	}
	var last [NumPOS]lastEntry
	for p := Noun; p < NumPOS; p++ {
		offsets[p] = map[uint32]bool{}
		path := filepath.Join(dir, "index."+posFiles[p])
		err := eachLine(path, func(line string, n int, _ int64) error {
			if strings.HasPrefix(line, " ") || line == "" {
				return nil // licence header
			}
			f := strings.Fields(line)
			if len(f) < 6 {
				return fmt.Errorf("short line %q", line)
			}
			nSyn, err1 := strconv.Atoi(f[2])
			nPtr, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || nSyn <= 0 || nPtr < 0 || nSyn > len(f)-6 || nPtr > len(f)-6 || 4+nPtr+2+nSyn != len(f) {
				return fmt.Errorf("bad line %q: want lemma, pos, synset_cnt, p_cnt, p_cnt pointers, sense_cnt, tagsense_cnt and synset_cnt offsets", line)
			}
			nSense, err1 := strconv.Atoi(f[4+nPtr])
			nTagged, err2 := strconv.Atoi(f[5+nPtr])
			if err1 != nil || err2 != nil || nSense != nSyn || nTagged < 0 || nTagged > nSense {
				return fmt.Errorf("bad line %q: sense_cnt %q and tagsense_cnt %q, want sense_cnt = synset_cnt (%d) and tagsense_cnt 0 to sense_cnt", line, f[4+nPtr], f[5+nPtr], nSyn)
			}
			offs := make([]uint32, nSyn)
			for i, s := range f[len(f)-nSyn:] {
				v, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					return fmt.Errorf("bad offset in %q", line)
				}
				offs[i] = uint32(v)
				offsets[p][uint32(v)] = true
			}
			raw = append(raw, indexEntry{lemma: f[0], pos: p, offs: offs, tagged: nTagged, line: n})
			last[p] = lastEntry{f[0], n}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("wordnet: %w", err)
		}
		if len(offsets[p]) == 0 {
			return nil, fmt.Errorf("wordnet: %s has no entry", path)
		}
	}
	// Dense synset ids in (POS, offset) order.
	ids := [NumPOS]map[uint32]int32{}
	next := int32(0)
	for p := Noun; p < NumPOS; p++ {
		list := make([]uint32, 0, len(offsets[p]))
		for o := range offsets[p] {
			list = append(list, o)
		}
		sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })
		ids[p] = make(map[uint32]int32, len(list))
		for _, o := range list {
			ids[p][o] = next
			next++
		}
	}

	b := newBuilder()
	b.nSynsets = int(next)
	for _, r := range raw {
		ss := make([]int32, len(r.offs))
		for i, o := range r.offs {
			ss[i] = ids[r.pos][o]
		}
		b.add(r.lemma, r.pos, ss)
	}

	// Frequencies: cntlist.rev lines are "lemma%ss_type:... sense_number tag_cnt".
	counts := 0
	cntPath := filepath.Join(dir, "cntlist.rev")
	// A line that does not parse is an error: skipped, a damaged line
	// changed a lemma's sense order, and SPICE's scores, without a word.
	var cntLast string // the last frequency line, for the check below
	err := eachLine(cntPath, func(line string, n int, _ int64) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		bad := func() error {
			return fmt.Errorf("bad frequency line %q: want lemma%%ss_type:lex_filenum:lex_id:: sense_number tag_cnt, ss_type 1 to 5", line)
		}
		pct := strings.IndexByte(f[0], '%')
		if len(f) != 3 || pct <= 0 || pct+1 >= len(f[0]) {
			return bad()
		}
		lemma := strings.ToLower(f[0][:pct])
		var p POS
		switch f[0][pct+1] {
		case '1':
			p = Noun
		case '2':
			p = Verb
		case '3', '5':
			p = Adj
		case '4':
			p = Adv
		default:
			return bad()
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			return bad()
		}
		cnt, err := strconv.Atoi(f[2])
		if err != nil || cnt < 0 {
			return bad()
		}
		b.addFreq(lemma, p, cnt)
		counts++
		cntLast = fmt.Sprintf("line %d, %q", n, line)
		return nil
	})
	switch {
	case err == nil && counts == 0:
		// A truncated copy would silently change every sense order.
		return nil, fmt.Errorf("wordnet: %s has no frequency line (lemma%%key sense_number tag_cnt); remove it to go without frequencies", cntPath)
	case err == nil:
		// cntlist.rev is sorted by sense key: cut short, it lacks the
		// counts of the last lemmas, which their index entries announce.
		for _, r := range raw {
			if have := b.data[r.lemma].tagged[r.pos]; have < r.tagged {
				return nil, fmt.Errorf("wordnet: %s:%d: %s (%s): tagsense_cnt is %d but %s holds %d counts of its senses: want one for each tagged sense (is %s cut short? its last line is %s)",
					filepath.Join(dir, "index."+posFiles[r.pos]), r.line, r.lemma, posFiles[r.pos], r.tagged, cntPath, have, cntPath, cntLast)
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("wordnet: %w", err)
	}

	// The data files: each synset line starts with its own byte offset; the
	// noun hypernym graph gives the animate flag.
	hyper := map[uint32][]uint32{}
	nounOK := true // false without data.noun, which leaves the flag off
	for p := Noun; p < NumPOS; p++ {
		dataPath := filepath.Join(dir, "data."+posFiles[p])
		indexPath := filepath.Join(dir, "index."+posFiles[p])
		have := map[uint32]bool{} // the synsets of the data file
		var lastOff int64 = -1
		// The first word of a synset that no index entry names with it.
		var unindexed struct {
			line      int
			off, word string
		}
		err := eachLine(dataPath, func(line string, n int, at int64) error {
			if strings.HasPrefix(line, " ") || line == "" {
				return nil
			}
			if bar := strings.Index(line, " | "); bar >= 0 {
				line = line[:bar]
			}
			f := strings.Fields(line)
			if len(f) < 4 {
				return fmt.Errorf("short data line %q", line)
			}
			off, err := strconv.ParseUint(f[0], 10, 32)
			if err != nil {
				return fmt.Errorf("bad data line %q", line)
			}
			wcnt, err := strconv.ParseUint(f[3], 16, 32)
			if err != nil {
				return fmt.Errorf("bad data line %q", line)
			}
			k := 4 + 2*int(wcnt)
			if k >= len(f) {
				return fmt.Errorf("bad data line %q", line)
			}
			pcnt, err := strconv.Atoi(f[k])
			if err != nil || pcnt < 0 || pcnt > (len(f)-k-1)/4 {
				return fmt.Errorf("bad data line %q: pointer count %q, want 0 to %d (the pointers on the line)", line, f[k], (len(f)-k-1)/4)
			}
			if int64(off) != at {
				return fmt.Errorf("the line starts at byte %d but names offset %s: want its own byte offset (a line before it was added, removed or changed)", at, f[0])
			}
			for i := 0; i < int(wcnt) && unindexed.line == 0; i++ {
				if !indexed(b, ids[p], p, f[4+2*i], uint32(off)) {
					unindexed.line, unindexed.off, unindexed.word = n, f[0], f[4+2*i]
				}
			}
			have[uint32(off)] = true
			lastOff = at
			for i := 0; p == Noun && i < pcnt; i++ {
				sym, tgt, tpos := f[k+1+4*i], f[k+2+4*i], f[k+3+4*i]
				if (sym == "@" || sym == "@i") && tpos == "n" {
					t, err := strconv.ParseUint(tgt, 10, 32)
					if err == nil {
						hyper[uint32(off)] = append(hyper[uint32(off)], uint32(t))
					}
				}
			}
			return nil
		})
		if err == nil && len(have) == 0 {
			without := "its checks"
			if p == Noun {
				without = "the animate flag"
			}
			err = fmt.Errorf("%s has no synset line; remove it to go without %s", dataPath, without)
		}
		if err == nil {
			// An index entry naming no synset line first: a damaged
			// offset leaves its synset unnamed too.
			err = missingSynset(indexPath, dataPath, lastOff, p, raw, have)
		}
		if err == nil && unindexed.line > 0 {
			err = fmt.Errorf("%s:%d: synset %s has the word %q, which no entry of %s names with it; its last entry is %q (line %d): want an entry for every word of every synset (is %s cut short?)",
				dataPath, unindexed.line, unindexed.off, unindexed.word, indexPath, last[p].lemma, last[p].line, indexPath)
		}
		switch {
		case p == Noun && errors.Is(err, fs.ErrNotExist):
			nounOK = false
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("wordnet: %w", err)
		}
	}
	if nounOK {
		memo := map[uint32]bool{}
		var animate func(o uint32, depth int) bool
		animate = func(o uint32, depth int) bool {
			if o == personOffset || o == animalOffset {
				return true
			}
			if v, ok := memo[o]; ok {
				return v
			}
			memo[o] = false // cycle guard
			v := false
			if depth < 64 {
				for _, h := range hyper[o] {
					if animate(h, depth+1) {
						v = true
						break
					}
				}
			}
			memo[o] = v
			return v
		}
		// A noun is animate when its first sense is, provided that sense
		// order means something: the lemma was seen in the tagged corpus, or
		// most of its senses are animate (skateboarder, but not hot_dog,
		// whose untagged first sense is a show-off).
		for _, r := range raw {
			if r.pos != Noun || !animate(r.offs[0], 0) {
				continue
			}
			n := 0
			for _, o := range r.offs {
				if animate(o, 0) {
					n++
				}
			}
			if b.data[r.lemma].freq[Noun] > 0 || 2*n > len(r.offs) {
				b.flag(r.lemma, FlagAnimate)
			}
		}
	}

	for p := Noun; p < NumPOS; p++ {
		err := eachLine(filepath.Join(dir, posFiles[p]+".exc"), func(line string, _ int, _ int64) error {
			f := strings.Fields(line)
			if len(f) < 2 {
				return nil
			}
			b.addExc(p, f[0], f[1:])
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("wordnet: %w", err)
		}
	}
	return b.build(), nil
}

// indexEntry is a line of index.POS.
type indexEntry struct {
	lemma  string
	pos    POS
	offs   []uint32 // synset offsets into data.POS, first sense first
	tagged int      // senses with a count in cntlist.rev (tagsense_cnt)
	line   int      // in index.POS
}

// missingSynset returns the error for the first offset in raw's entries of
// index.POS (at indexPath) that starts no synset line of data.POS (at
// dataPath; have holds the offsets that do, the last at lastOff).
func missingSynset(indexPath, dataPath string, lastOff int64, p POS, raw []indexEntry, have map[uint32]bool) error {
	for _, r := range raw {
		if r.pos != p {
			continue
		}
		for _, o := range r.offs {
			if have[o] {
				continue
			}
			why := "a damaged offset?"
			if int64(o) > lastOff {
				why = "is " + dataPath + " cut short?"
			}
			return fmt.Errorf("%s:%d: %s names synset %08d, which starts no synset line of %s (the last starts at byte %d): want the offset of one (%s)",
				indexPath, r.line, r.lemma, o, dataPath, lastOff, why)
		}
	}
	return nil
}

// indexed reports whether the index entry of a data file's word (its
// lemma: lower case, without an adjective's "(a)", "(p)" or "(ip)") of POS
// p holds the synset at offset off; ids maps p's offsets to synset ids.
func indexed(b *builder, ids map[uint32]int32, p POS, word string, off uint32) bool {
	if i := strings.IndexByte(word, '('); i > 0 && strings.HasSuffix(word, ")") {
		word = word[:i]
	}
	e := b.data[strings.ToLower(word)]
	id, ok := ids[off]
	return e != nil && ok && slices.Contains(e.senses[p], id)
}

// eachLine calls fn with every line of the file at path, without its
// "\n" or "\r\n", its number (from 1) and the byte offset it starts at.
// An error of fn is returned wrapped in "path:line: ".
func eachLine(path string, fn func(line string, n int, at int64) error) error {
	f, err := infile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	n := 0
	var at int64
	for {
		line, err := r.ReadString('\n')
		if len(line) > 0 {
			n++
			if e := fn(strings.TrimRight(line, "\r\n"), n, at); e != nil {
				return fmt.Errorf("%s:%d: %w", path, n, e)
			}
			at += int64(len(line))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// builder accumulates lemma data before the DB's flat arrays are laid out.
type builder struct {
	nSynsets int
	data     map[string]*bEntry
	exc      [NumPOS]map[string][]string
}

type bEntry struct {
	senses [NumPOS][]int32
	freq   [NumPOS]uint32
	tagged [NumPOS]int // senses with a count, for Parse's check only
	mask   uint8
}

func newBuilder() *builder {
	b := &builder{data: map[string]*bEntry{}}
	for p := range b.exc {
		b.exc[p] = map[string][]string{}
	}
	return b
}

func (b *builder) get(lemma string) *bEntry {
	e := b.data[lemma]
	if e == nil {
		e = &bEntry{}
		b.data[lemma] = e
	}
	return e
}

func (b *builder) add(lemma string, p POS, senses []int32) {
	e := b.get(lemma)
	e.senses[p] = senses
	e.mask |= 1 << p
}

// addFreq adds to an existing (lemma, p) only: cntlist.rev also lists
// lemmas whose case differs from the index.
func (b *builder) addFreq(lemma string, p POS, n int) {
	e := b.data[lemma]
	if e == nil || e.mask&(1<<p) == 0 || n <= 0 {
		return
	}
	e.freq[p] += uint32(n)
	e.tagged[p]++
}

func (b *builder) flag(lemma string, f uint8) {
	if e := b.data[lemma]; e != nil {
		e.mask |= f
	}
}

func (b *builder) addExc(p POS, word string, bases []string) {
	b.exc[p][word] = append(b.exc[p][word], bases...)
}

func (b *builder) build() *DB {
	db := &DB{nSynsets: b.nSynsets, index: make(map[string]int32, len(b.data))}
	db.lemmas = make([]string, 0, len(b.data))
	for l := range b.data {
		db.lemmas = append(db.lemmas, l)
	}
	sort.Strings(db.lemmas)
	db.entries = make([]entry, len(db.lemmas))
	for i, l := range db.lemmas {
		be := b.data[l]
		e := &db.entries[i]
		e.mask = be.mask
		e.freq = be.freq
		for p := Noun; p < NumPOS; p++ {
			e.start[p] = uint32(len(db.senses))
			e.n[p] = uint16(len(be.senses[p]))
			db.senses = append(db.senses, be.senses[p]...)
		}
		db.index[l] = int32(i)
	}
	db.exc = b.exc
	return db
}
