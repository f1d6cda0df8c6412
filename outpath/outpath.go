// Package outpath holds the one rule that every xmr command applies to its
// outputs before any work: an output never destroys an input, and an
// existing file that is not a regular file is never replaced.
//
// A command lists the files and directories it reads (Input) and the paths
// it writes (Output), each with its flag, and calls Check. Check refuses,
// with an error naming both flags:
//
//   - an output that is an input: the same file (device and inode), or the
//     same path once symbolic links are resolved;
//   - an output inside an input directory (a run directory, a data
//     directory, an index), or an output directory that would write over
//     an input inside it;
//   - two outputs that name the same file.
//
// It refuses an input that is a FIFO, a socket or a device node (reading
// a FIFO waits for a writer), and an output that exists and is not what
// the command writes: a directory where a file goes, a file where a
// directory goes, and any device node, socket or FIFO, except a FIFO or a
// terminal given to an output that may be a stream (Stream), which is then
// written directly (package atomicfile does so) and never replaced.
package outpath

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
)

// Input is a file or a directory that a command reads.
type Input struct {
	// Flag names the input on the command line, e.g. "--checkpoint".
	Flag string
	// Path is the file or directory, or a glob pattern of files; empty
	// when the flag is not given. A path that does not exist is compared
	// by name only.
	Path string
}

// Kind is what an output is written as.
type Kind int

const (
	// File is a regular file, replaced atomically (package atomicfile).
	File Kind = iota
	// Stream is a file that may also be an existing FIFO or terminal,
	// which is then written directly.
	Stream
	// Dir is a directory that the command writes files into.
	Dir
)

// Output is a path that a command writes.
type Output struct {
	// Flag names the output on the command line, e.g. "--out".
	Flag string
	// Path is the file or directory; empty when the flag is not given.
	Path string
	// Kind says how Path is written.
	Kind Kind
	// Writes lists what else the output writes. For a Dir, the entries
	// it writes into Path, as filepath.Match patterns of paths relative
	// to it ("last.safetensors", "*_ims.npy"); nil means that the
	// directory is the command's as a whole, so that no input may lie in
	// it. For a File, other paths written beside it (e.g. OUT.partial),
	// which must be regular files too.
	Writes []string
}

// Error is Check's refusal of an output.
type Error struct {
	// Flag and Path are the refused output's.
	Flag, Path string
	// Other is the flag of the input or output it collides with; empty
	// when the output is refused for its kind of file.
	Other string
	msg   string
}

func (e *Error) Error() string { return e.msg }

// Check applies the rule to a command's inputs and outputs and returns the
// first refusal (an *Error), or nil. It reads only the file system's
// metadata: call it before any work, before any output is created.
func Check(inputs []Input, outputs []Output) error {
	var ins []entry
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		ins = append(ins, expand(in.Flag, in.Path)...)
	}
	// An input that is a FIFO, socket or device: opening a FIFO to read it
	// waits for a writer, for good when none comes.
	for _, in := range ins {
		if in.info != nil && !in.info.Mode().IsRegular() && !in.info.IsDir() {
			return &Error{Flag: in.flag, Path: in.path,
				msg: fmt.Sprintf("%s %s is %s, not a file or directory to read: give a regular file", in.flag, in.path, atomicfile.Describe(in.info.Mode()))}
		}
	}
	var outs []entry
	for _, o := range outputs {
		if o.Path == "" {
			continue
		}
		e := newEntry(o.Flag, o.Path)
		e.out = o
		outs = append(outs, e)
	}
	for _, o := range outs {
		for _, in := range ins {
			if err := collide(o, in); err != nil {
				return err
			}
		}
	}
	for i, a := range outs {
		for _, b := range outs[i+1:] {
			if a.same(b) {
				return &Error{Flag: b.flag, Path: b.path, Other: a.flag,
					msg: fmt.Sprintf("%s %s and %s %s name the same file: give each output a path of its own", a.flag, a.path, b.flag, b.path)}
			}
			for _, p := range [][2]entry{{a, b}, {b, a}} {
				if d, f := p[0], p[1]; d.out.Kind == Dir && d.holds(f) {
					return &Error{Flag: f.flag, Path: f.path, Other: d.flag,
						msg: fmt.Sprintf("%s %s is a file that %s %s writes: give %s a path of its own", f.flag, f.path, d.flag, d.path, f.flag)}
				}
			}
		}
	}
	for _, o := range outs {
		if err := checkKind(o); err != nil {
			return err
		}
	}
	return nil
}

// entry is one input or output path with what the file system says of it.
type entry struct {
	flag, path string
	abs        string      // absolute, symbolic links resolved as far as the path exists
	info       fs.FileInfo // nil when the path does not exist
	out        Output
}

func newEntry(flag, path string) entry {
	e := entry{flag: flag, path: path, abs: resolve(path)}
	if fi, err := os.Stat(path); err == nil {
		e.info = fi
	}
	return e
}

// expand returns the entries of an input path: the files a glob pattern
// matches, or the path itself.
func expand(flag, path string) []entry {
	if _, err := os.Lstat(path); err != nil && strings.ContainsAny(path, "*?[") {
		if matches, err := filepath.Glob(path); err == nil && len(matches) > 0 {
			var out []entry
			for _, m := range matches {
				out = append(out, newEntry(flag, m))
			}
			return out
		}
	}
	return []entry{newEntry(flag, path)}
}

// resolve returns path made absolute, with the symbolic links of its
// longest existing prefix resolved and the rest cleaned onto it.
func resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	rest := ""
	for p := abs; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// same reports whether a and b are the same file, or the same path.
func (a entry) same(b entry) bool {
	if a.info != nil && b.info != nil && os.SameFile(a.info, b.info) {
		return true
	}
	return a.abs == b.abs
}

// within reports whether e's path lies inside directory dir (an existing
// directory, compared by path and by the identity of e's ancestors).
func (e entry) within(dir entry) bool {
	if dir.info == nil || !dir.info.IsDir() {
		return strings.HasPrefix(e.abs, dir.abs+string(filepath.Separator))
	}
	if strings.HasPrefix(e.abs, dir.abs+string(filepath.Separator)) || dir.abs == string(filepath.Separator) {
		return true
	}
	for p := filepath.Dir(e.abs); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, dir.info) {
			return true
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// holds reports whether directory output d writes over f, which lies in
// it: anywhere in it if d writes the whole directory, else where one of
// its Writes patterns matches f's path or a leading part of it.
func (d entry) holds(f entry) bool {
	if d.out.Writes == nil {
		return f.within(d)
	}
	for _, pat := range d.out.Writes {
		// A pattern without wildcards names one entry: compare it as a
		// file too (a hard link, a path through a bind mount).
		if !strings.ContainsAny(pat, "*?[") && f.info != nil {
			if fi, err := os.Stat(filepath.Join(d.path, pat)); err == nil && os.SameFile(fi, f.info) {
				return true
			}
		}
	}
	if !f.within(d) {
		return false
	}
	rel, err := filepath.Rel(d.abs, f.abs)
	if err != nil {
		return false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for _, pat := range d.out.Writes {
		n := len(strings.Split(filepath.Clean(pat), string(filepath.Separator)))
		if n > len(parts) {
			continue
		}
		if ok, _ := filepath.Match(filepath.Clean(pat), filepath.Join(parts[:n]...)); ok {
			return true
		}
	}
	return false
}

// collide returns the refusal of output o against input in, if any.
func collide(o, in entry) error {
	refuse := func(format string, args ...any) error {
		return &Error{Flag: o.flag, Path: o.path, Other: in.flag, msg: fmt.Sprintf(format, args...)}
	}
	inDir := in.info != nil && in.info.IsDir()
	if o.same(in) {
		what := "the file"
		if inDir {
			what = "the directory"
		}
		return refuse("%s %s is %s that %s %s reads: writing it would destroy an input; give %s another path", o.flag, o.path, what, in.flag, in.path, o.flag)
	}
	if inDir && o.within(in) {
		return refuse("%s %s is inside %s %s, a directory that is read as input: write %s elsewhere", o.flag, o.path, in.flag, in.path, o.flag)
	}
	if o.out.Kind == Dir && o.holds(in) {
		return refuse("%s %s would write over %s %s, an input inside it: give %s another directory, or move the input out of it", o.flag, o.path, in.flag, in.path, o.flag)
	}
	if o.out.Kind != Dir {
		for _, w := range o.out.Writes {
			we := newEntry(o.flag, w)
			if we.same(in) || inDir && we.within(in) {
				return refuse("%s %s would write %s, which is %s %s or inside it: give %s another path", o.flag, o.path, w, in.flag, in.path, o.flag)
			}
		}
	}
	return nil
}

// checkKind refuses an existing output that is not what o writes.
func checkKind(o entry) error {
	refuse := func(format string, args ...any) error {
		return &Error{Flag: o.flag, Path: o.path, msg: fmt.Sprintf(format, args...)}
	}
	if o.out.Kind != Dir {
		for _, w := range o.out.Writes {
			if fi, err := os.Stat(w); err == nil && !fi.Mode().IsRegular() {
				return refuse("%s %s: %s, which it writes, is %s, not a regular file", o.flag, o.path, w, atomicfile.Describe(fi.Mode()))
			}
		}
	}
	if o.info == nil {
		return nil
	}
	m := o.info.Mode()
	switch o.out.Kind {
	case Dir:
		if !m.IsDir() {
			return refuse("%s %s is %s, not a directory", o.flag, o.path, atomicfile.Describe(m))
		}
	case File:
		if !m.IsRegular() {
			return refuse("%s %s is %s, not a regular file: it is refused, never replaced (this output is written beside its destination and renamed into place)", o.flag, o.path, atomicfile.Describe(m))
		}
	case Stream:
		if !m.IsRegular() && !atomicfile.IsStream(o.info) {
			return refuse("%s %s is %s, not a regular file: it is refused, never replaced (a FIFO or a terminal is written as a stream; anything else must be a regular file)", o.flag, o.path, atomicfile.Describe(m))
		}
	}
	return nil
}
