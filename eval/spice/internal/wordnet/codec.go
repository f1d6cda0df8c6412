package wordnet

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// The table format, version 1, inside a gzip stream (all integers unsigned
// LEB128 varints, strings a varint length then bytes):
//
//	magic    "XMRWN1\n"
//	nSynsets, nLemmas
//	nLemmas times, lemmas in ascending byte order:
//	  shared prefix length with the previous lemma, suffix (string)
//	  mask byte: bit p (0 noun, 1 verb, 2 adj, 3 adv) when the lemma has
//	             that part of speech; bit 4 the animate flag
//	  for each part of speech present, in that order:
//	    freq, nSenses, nSenses synset ids (sense order)
//	for noun, verb, adj, adv: nExceptions, then per exception in ascending
//	  order: the inflected form (string), nBases, the bases (strings)
//	trailer  "END\n"
//
// gzip's CRC-32 checks the whole.
const (
	magic   = "XMRWN1\n"
	trailer = "END\n"
)

// WriteTo writes db in the compact table format, gzip-compressed at the best
// compression. The output is deterministic.
func (db *DB) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	zw, err := gzip.NewWriterLevel(cw, gzip.BestCompression)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(zw, 1<<16)
	var buf [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(buf[:binary.PutUvarint(buf[:], v)]) }
	str := func(s string) { uv(uint64(len(s))); bw.WriteString(s) }

	bw.WriteString(magic)
	uv(uint64(db.nSynsets))
	uv(uint64(len(db.lemmas)))
	prev := ""
	for i, l := range db.lemmas {
		k := 0
		for k < len(l) && k < len(prev) && l[k] == prev[k] {
			k++
		}
		uv(uint64(k))
		str(l[k:])
		prev = l
		e := &db.entries[i]
		bw.WriteByte(e.mask)
		for p := Noun; p < NumPOS; p++ {
			if e.mask&(1<<p) == 0 {
				continue
			}
			uv(uint64(e.freq[p]))
			uv(uint64(e.n[p]))
			for _, s := range db.senses[e.start[p] : e.start[p]+uint32(e.n[p])] {
				uv(uint64(s))
			}
		}
	}
	for p := Noun; p < NumPOS; p++ {
		keys := make([]string, 0, len(db.exc[p]))
		for k := range db.exc[p] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		uv(uint64(len(keys)))
		for _, k := range keys {
			str(k)
			uv(uint64(len(db.exc[p][k])))
			for _, b := range db.exc[p][k] {
				str(b)
			}
		}
	}
	bw.WriteString(trailer)
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	if err := zw.Close(); err != nil {
		return cw.n, err
	}
	return cw.n, cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// errFormat reports a malformed table.
var errFormat = errors.New("wordnet: malformed table")

// Read decodes a table written by WriteTo.
func Read(r io.Reader) (*DB, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("wordnet: %w", err)
	}
	defer zr.Close()
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("wordnet: %w", err)
	}
	return decode(data)
}

// decode parses the uncompressed table. Every count is bounded by the bytes
// left to hold it before anything is allocated, so that a corrupt count
// costs an error, not gigabytes.
func decode(data []byte) (*DB, error) {
	d := &decoder{b: data}
	if string(d.bytes(len(magic))) != magic {
		return nil, fmt.Errorf("%w: bad magic", errFormat)
	}
	db := &DB{}
	db.nSynsets = d.int(1 << 24)
	// A lemma takes at least 3 bytes: prefix length, suffix length, mask.
	n := d.int(min(1<<24, d.left()/3))
	if d.err != nil {
		return nil, d.err
	}
	db.lemmas = make([]string, n)
	db.entries = make([]entry, n)
	db.index = make(map[string]int32, n)
	db.senses = make([]int32, 0, 3*n/2)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.int(len(prev))
		suf := d.str()
		l := prev[:k] + suf
		if i > 0 && l <= prev {
			d.fail("lemmas out of order")
			break
		}
		db.lemmas[i] = l
		db.index[l] = int32(i)
		prev = l
		e := &db.entries[i]
		e.mask = d.byte()
		for p := Noun; p < NumPOS; p++ {
			e.start[p] = uint32(len(db.senses))
			if e.mask&(1<<p) == 0 {
				continue
			}
			e.freq[p] = uint32(d.int(1 << 31))
			ns := d.int(1 << 15)
			e.n[p] = uint16(ns)
			for j := 0; j < ns; j++ {
				db.senses = append(db.senses, int32(d.int(db.nSynsets-1)))
			}
		}
	}
	for p := Noun; p < NumPOS && d.err == nil; p++ {
		ne := d.int(min(1<<20, d.left()/2)) // an exception takes at least 2 bytes
		db.exc[p] = make(map[string][]string, ne)
		for j := 0; j < ne && d.err == nil; j++ {
			k := d.str()
			nb := d.int(min(64, d.left()))
			bases := make([]string, 0, nb)
			for x := 0; x < nb; x++ {
				bases = append(bases, d.str())
			}
			db.exc[p][k] = bases
		}
	}
	if d.err == nil && string(d.bytes(len(trailer))) != trailer {
		d.fail("bad trailer")
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return db, nil
}

type decoder struct {
	b   []byte
	off int
	err error
}

// left returns the number of bytes not yet read.
func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", errFormat, msg, d.off)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// int reads a varint that must be at most max.
func (d *decoder) int(max int) int {
	v := d.uvarint()
	if v > uint64(max) {
		d.fail("value out of range")
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || d.off+n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) str() string { return string(d.bytes(d.int(1 << 16))) }

func (d *decoder) byte() byte {
	b := d.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}
