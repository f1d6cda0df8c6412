package wordnet

import (
	"bytes"
	"compress/gzip"
	"errors"
	"reflect"
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
