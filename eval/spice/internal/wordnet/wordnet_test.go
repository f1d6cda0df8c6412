package wordnet

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func embedded(t testing.TB) *DB {
	t.Helper()
	db, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestEmbeddedCounts(t *testing.T) {
	db := embedded(t)
	// WordNet 3.0: 147,306 distinct lemma strings over the four index files,
	// 117,659 synsets, 206,941 word senses.
	if db.Len() != 147306 || db.NumSynsets() != 117659 || db.NumSenses() != 206941 {
		t.Fatalf("got %d lemmas, %d synsets, %d senses", db.Len(), db.NumSynsets(), db.NumSenses())
	}
}

func shareSynset(a, b []int32) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func TestLookups(t *testing.T) {
	db := embedded(t)
	for _, c := range []struct {
		lemma string
		pos   POS
		want  bool
	}{
		{"dog", Noun, true}, {"dog", Verb, true}, {"dog", Adj, false},
		{"fire_hydrant", Noun, true}, {"tennis_racket", Noun, true},
		{"red", Adj, true}, {"sit", Verb, true}, {"dogs", Noun, false},
		{"xyzzy", Noun, false},
	} {
		if got := db.Has(c.lemma, c.pos); got != c.want {
			t.Errorf("Has(%q, %v) = %v", c.lemma, c.pos, got)
		}
	}
	for _, c := range []struct {
		a, b string
		pos  POS
		want bool
	}{
		{"couch", "sofa", Noun, true},
		{"car", "automobile", Noun, true},
		{"bike", "bicycle", Noun, true},
		{"photo", "picture", Noun, true},
		{"dog", "cat", Noun, false},
		{"man", "woman", Noun, false},
		{"tennis_racket", "tennis_racquet", Noun, true},
	} {
		if got := shareSynset(db.Synsets(c.a, c.pos), db.Synsets(c.b, c.pos)); got != c.want {
			t.Errorf("synonyms(%q, %q) = %v", c.a, c.b, got)
		}
	}
	if db.Freq("man", Noun) < 1000 || db.Freq("stand", Verb) <= db.Freq("stand", Noun) {
		t.Errorf("frequencies: man/n %d, stand/v %d, stand/n %d", db.Freq("man", Noun), db.Freq("stand", Verb), db.Freq("stand", Noun))
	}
	for _, c := range []struct {
		lemma string
		want  bool
	}{{"man", true}, {"dog", true}, {"skateboarder", true}, {"giraffe", true}, {"table", false}, {"shirt", false}, {"pizza", false}} {
		if got := db.Animate(c.lemma); got != c.want {
			t.Errorf("Animate(%q) = %v", c.lemma, got)
		}
	}
}

func TestMorphy(t *testing.T) {
	db := embedded(t)
	for _, c := range []struct {
		word string
		pos  POS
		want string
	}{
		{"dogs", Noun, "dog"}, {"women", Noun, "woman"}, {"men", Noun, "man"},
		{"buses", Noun, "bus"}, {"boxes", Noun, "box"}, {"benches", Noun, "bench"},
		{"ladies", Noun, "lady"}, {"leaves", Noun, "leaf"}, {"geese", Noun, "goose"},
		{"fire_hydrants", Noun, "fire_hydrant"}, {"tennis rackets", Noun, "tennis_racket"},
		{"dog", Noun, "dog"},
		{"running", Verb, "run"}, {"sitting", Verb, "sit"}, {"rides", Verb, "ride"},
		{"riding", Verb, "ride"}, {"holding", Verb, "hold"}, {"lying", Verb, "lie"},
		{"flies", Verb, "fly"}, {"parked", Verb, "park"}, {"sat", Verb, "sit"},
		{"ate", Verb, "eat"}, {"skateboarding", Verb, "skateboard"},
		{"swinging", Verb, "swing"}, // not the rarer "swinge"
		{"bigger", Adj, "big"}, {"largest", Adj, "large"}, {"red", Adj, "red"},
	} {
		got, ok := db.Base(c.word, c.pos)
		if !ok || got != c.want {
			t.Errorf("Base(%q, %v) = %q, %v; want %q", c.word, c.pos, got, ok, c.want)
		}
	}
	if _, ok := db.Base("qwzx", Noun); ok {
		t.Error("Base of a non-word succeeded")
	}
	if m := db.Morphy("axes", Noun); len(m) < 2 {
		t.Errorf("Morphy(axes) = %v, want ax and axis", m)
	}
}

func TestRoundTrip(t *testing.T) {
	db := embedded(t)
	var buf bytes.Buffer
	if _, err := db.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	db2, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(db, db2) {
		t.Fatal("table does not round-trip")
	}
}

// TestEmbeddedMatchesDict regenerates the table from the installed WordNet
// and checks that the embedded one holds the same data.
func TestEmbeddedMatchesDict(t *testing.T) {
	dir, err := FindDict("")
	if err != nil {
		t.Skip("no WordNet dictionary installed (apt-get install wordnet-base):", err)
	}
	parsed, err := Parse(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(embedded(t), parsed) {
		t.Fatal("embedded table differs from " + dir + "; run go generate in eval/spice/internal/wordnet")
	}
}

func TestDefaultEnv(t *testing.T) {
	t.Setenv(EnvVar, t.TempDir())
	if _, err := Default(); err == nil {
		t.Fatal("Default with an empty XMR_WORDNET directory succeeded")
	}
	t.Setenv(EnvVar, "")
	db, err := Default()
	if err != nil || db != embedded(t) {
		t.Fatal("Default without XMR_WORDNET is not the embedded table", err)
	}
}

func TestReadCorrupt(t *testing.T) {
	if _, err := Read(bytes.NewReader([]byte("not gzip"))); err == nil {
		t.Error("Read accepted garbage")
	}
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	for _, b := range [][]byte{nil, []byte(magic), []byte(magic + "\x05\x02\x00\x03dog"), []byte("XMRWN9\n")} {
		if _, err := Read(bytes.NewReader(gz(b))); err == nil {
			t.Errorf("Read accepted %q", b)
		}
	}
	// Every truncation of the real table fails cleanly.
	raw, err := gzipBody(wn30)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{10, 1000, len(raw) / 2, len(raw) - 1} {
		if _, err := Read(bytes.NewReader(gz(raw[:n]))); err == nil {
			t.Errorf("Read accepted a table truncated to %d bytes", n)
		}
	}
}

func gzipBody(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	_, err = out.ReadFrom(zr)
	return out.Bytes(), err
}

func FuzzRead(f *testing.F) {
	raw, err := gzipBody(wn30)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw[:200])
	f.Add([]byte(magic))
	f.Add([]byte(magic + "\x05\x02\x00\x01a\x01\x03\x02\x00\x01\x00\x00\x00\x00END\n"))
	f.Add([]byte(magic + "\xff\xff\xff\x07\xff\xff\xff\x07"))
	// The table parser itself: gzip is the standard library's, and
	// compressing every input (a compressor's state is about a megabyte)
	// only slows the fuzzer. A corrupt count must not allocate without
	// bound (it once asked for 16M-entry maps: 3 executions in 20 s).
	f.Fuzz(func(t *testing.T, b []byte) {
		db, err := decode(b)
		if err != nil {
			if !errors.Is(err, errFormat) {
				t.Fatalf("error %v does not wrap errFormat", err)
			}
			return
		}
		for i, l := range db.lemmas {
			if db.index[l] != int32(i) {
				t.Fatalf("lemma %q at %d indexed as %d", l, i, db.index[l])
			}
		}
	})
}

// dataFile lays out a WordNet data file: header, then the synset lines,
// each with its own byte offset in place of its "%08d". It returns the
// file and the offsets, as the index files write them.
func dataFile(header string, synsets ...string) (body string, offs []string) {
	var b strings.Builder
	b.WriteString(header)
	for _, s := range synsets {
		off := fmt.Sprintf("%08d", b.Len())
		offs = append(offs, off)
		b.WriteString(strings.Replace(s, "%08d", off, 1))
	}
	return b.String(), offs
}

// miniFiles returns a tiny WordNet dictionary, file name to content: three
// nouns (two of one synset), two verbs, an adjective and an adverb, whose
// files cross-check (data offsets, an index entry for every word of every
// synset, a frequency for every tagged sense).
func miniFiles() map[string]string {
	noun, n := dataFile("  1 licence header\n",
		"%08d 05 n 01 dog 0 001 @ 00015388 n 0000 | a dog\n",
		"%08d 18 n 02 adult_male 0 man 0 001 @ 00007846 n 0000 | a man\n")
	verb, v := dataFile("  1 licence header\n",
		"%08d 38 v 01 run 0 000 01 + 01 00 | move fast\n",
		"%08d 38 v 01 walk 0 000 01 + 01 00 | move slowly\n")
	// data.adj writes a word as found, with an adjective marker.
	adj, a := dataFile("", "%08d 00 a 01 Red(p) 0 000 | red\n")
	adv, r := dataFile("", "%08d 02 r 01 fast 0 000 | quickly\n")
	return map[string]string{
		"index.noun":  "  1 licence header\nadult_male n 1 1 @ 1 0 " + n[1] + "\ndog n 1 1 @ 1 1 " + n[0] + "\nman n 1 1 @ 1 1 " + n[1] + "\n",
		"index.verb":  "run v 1 0 1 0 " + v[0] + "\nwalk v 1 0 1 0 " + v[1] + "\n",
		"index.adj":   "red a 1 0 1 0 " + a[0] + "\n",
		"index.adv":   "fast r 1 0 1 0 " + r[0] + "\n",
		"noun.exc":    "men man\n",
		"verb.exc":    "ran run\n",
		"adj.exc":     "",
		"adv.exc":     "",
		"cntlist.rev": "dog%1:05:00:: 1 5\nman%1:18:00:: 1 100\n",
		"data.noun":   noun,
		"data.verb":   verb,
		"data.adj":    adj,
		"data.adv":    adv,
	}
}

// miniDict writes miniFiles to a directory, with the files named in files
// replaced, and returns the directory.
func miniDict(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := miniFiles()
	for name, body := range files {
		all[name] = body
	}
	for name, body := range all {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cut returns miniFiles' file name with its last n lines removed, as a
// copy cut short at a line boundary.
func cut(name string, n int) map[string]string {
	lines := strings.SplitAfter(miniFiles()[name], "\n")
	lines = lines[:len(lines)-1] // the empty string after the final "\n"
	return map[string]string{name: strings.Join(lines[:len(lines)-n], "")}
}

// edit returns miniFiles' file name with old replaced by new, once.
func edit(name, old, new string) map[string]string {
	return map[string]string{name: strings.Replace(miniFiles()[name], old, new, 1)}
}

// TestParseHostile feeds Parse dictionaries crafted to break it: pointer
// and synset counts that index past the line (a data.noun pointer count
// of 2^62 overflowed the bound check and indexed out of range), empty
// index and frequency files, and files cut short at a line boundary (which
// parse, and changed the table silently): each is an error naming the
// file and line, and what was expected.
func TestParseHostile(t *testing.T) {
	if _, err := Parse(miniDict(t, nil)); err != nil {
		t.Fatalf("the mini dictionary: %v", err)
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"data.noun pointer count overflows", map[string]string{"data.noun": "02084071 05 n 01 dog 0 4611686018427387904 @ 00015388 n 0000\n"},
			"data.noun:1: bad data line"},
		{"data.noun pointer count too big", map[string]string{"data.noun": "02084071 05 n 01 dog 0 002 @ 00015388 n 0000\n"},
			"pointer count \"002\", want 0 to 1"},
		{"data.noun negative pointer count", map[string]string{"data.noun": "02084071 05 n 01 dog 0 -1 @ 00015388 n 0000\n"},
			"data.noun:1: bad data line"},
		{"data.noun empty", map[string]string{"data.noun": "  1 licence header only\n"}, "data.noun has no synset line"},
		{"index.noun synset count past the line", map[string]string{"index.noun": "dog n 100 -99 1 0 02084071\n"},
			"index.noun:1: bad line"},
		{"index.noun empty", map[string]string{"index.noun": "  1 licence header only\n"}, "index.noun has no entry"},
		{"index.verb empty", map[string]string{"index.verb": "\n"}, "index.verb has no entry"},
		{"cntlist.rev empty", map[string]string{"cntlist.rev": "\n"}, "cntlist.rev has no frequency line"},
		{"cntlist.rev flipped ss_type", map[string]string{"cntlist.rev": "man%1:18:00:: 1 100\ndog%9:05:00:: 1 42\n"}, "cntlist.rev:2: bad frequency line"},
		{"cntlist.rev count not a number", map[string]string{"cntlist.rev": "man%1:18:00:: 1 1O0\n"}, "cntlist.rev:1: bad frequency line"},
		{"cntlist.rev columns swapped", map[string]string{"cntlist.rev": "100 1 man%1:18:00::\n"}, "cntlist.rev:1: bad frequency line"},
		{"index.noun sense_cnt is not synset_cnt", edit("index.noun", "@ 1 1", "@ 2 1"), "index.noun:3: bad line \"dog n 1 1 @ 2 1 00000019\": sense_cnt \"2\" and tagsense_cnt \"1\", want sense_cnt = synset_cnt (1)"},
		{"index.noun tagsense_cnt over sense_cnt", edit("index.noun", "@ 1 1", "@ 1 3"), "index.noun:3: bad line"},
		// Cut short at a line boundary: every file parses, the others
		// tell.
		// (man's synset is still named by adult_male)
		{"index.noun cut short", cut("index.noun", 1), "data.noun:3: synset 00000072 has the word \"man\", which no entry of "},
		{"index.noun cut short (the message)", cut("index.noun", 1), "index.noun names with it; its last entry is \"dog\" (line 3): want an entry for every word of every synset (is "},
		{"index.noun cut short (the file)", cut("index.noun", 1), "index.noun cut short?)"},
		{"index.noun cut by two", cut("index.noun", 2), "data.noun:2: synset 00000019 has the word \"dog\""},
		{"index.verb cut short", cut("index.verb", 1), "data.verb:3: synset 00000069 has the word \"walk\", which no entry of"},
		{"data.noun cut short", cut("data.noun", 1), "index.noun:2: adult_male names synset 00000072, which starts no synset line of "},
		{"data.noun cut short (the message)", cut("data.noun", 1), "data.noun (the last starts at byte 19): want the offset of one (is "},
		{"data.verb cut short", cut("data.verb", 1), "index.verb:2: walk names synset 00000069, which starts no synset line of"},
		{"data.adv cut to its header", cut("data.adv", 1), "data.adv has no synset line; remove it to go without its checks"},
		{"index.adj damaged offset", edit("index.adj", "00000000", "00000001"), "index.adj:1: red names synset 00000001, which starts no synset line of"},
		{"data.noun line removed in the middle", edit("data.noun", "00000019 05 n 01 dog 0 001 @ 00015388 n 0000 | a dog\n", ""),
			"data.noun:2: the line starts at byte 19 but names offset 00000072: want its own byte offset"},
		{"cntlist.rev cut short", cut("cntlist.rev", 1), "index.noun:4: man (noun): tagsense_cnt is 1 but "},
		{"cntlist.rev cut short (the message)", cut("cntlist.rev", 1), "cntlist.rev holds 0 counts of its senses: want one for each tagged sense (is "},
		{"cntlist.rev cut short (its last line)", cut("cntlist.rev", 1), "cut short? its last line is line 1, \"dog%1:05:00:: 1 5\")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(miniDict(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParseDict fuzzes the dictionary parser on the two files with counts
// that index the fields of a line: index.noun and data.noun. It must return
// a DB or an error, never panic.
func FuzzParseDict(f *testing.F) {
	f.Add("dog n 1 1 @ 1 0 02084071\n", "02084071 05 n 01 dog 0 001 @ 00015388 n 0000 | a dog\n")
	f.Add("dog n 100 -99 1 0 02084071\n", "02084071 05 n 01 dog 0 4611686018427387904 @ 00015388 n 0000\n")
	f.Add("dog n 1 0 1 0 1\n", "1 05 n ffffffff dog 0 0\n")
	dir := f.TempDir()
	base := map[string]string{
		"index.verb": "run v 1 0 1 0 01926311\n", "index.adj": "red a 1 0 1 0 00381097\n",
		"index.adv": "fast r 1 0 1 0 00086000\n", "noun.exc": "", "verb.exc": "", "adj.exc": "", "adv.exc": "",
	}
	for name, body := range base {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, index, data string) {
		if err := os.WriteFile(filepath.Join(dir, "index.noun"), []byte(index), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data.noun"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		Parse(dir)
	})
}
