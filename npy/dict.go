package npy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseDict parses the header dictionary of an .npy file, a Python literal
// such as
//
//	{'descr': '<f4', 'fortran_order': False, 'shape': (5000, 36, 2048), }
//
// with its three keys in any order, either quote character, optional
// spaces and trailing commas, and Python 2's 'L' suffix on integers. The
// shape's dimensions are returned as read, negative ones included, for the
// caller to check.
func parseDict(raw []byte) (descr string, fortran bool, shape []int64, err error) {
	s := strings.TrimRight(string(raw), " \t\r\n\x00")
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return "", false, nil, errors.New("not a Python dict")
	}
	p := &scanner{s: s, i: 1}
	var haveDescr, haveOrder, haveShape bool
	for !p.eat('}') {
		key, ok := p.str()
		if !ok {
			return "", false, nil, fmt.Errorf("want a quoted key at offset %d", p.i)
		}
		if !p.eat(':') {
			return "", false, nil, fmt.Errorf("want ':' after key %q", key)
		}
		var seen *bool
		switch key {
		case "descr":
			seen = &haveDescr
			if c := p.peek(); c == '[' || c == '{' || c == '(' {
				return "", false, nil, errors.New("structured dtypes are not supported")
			}
			if descr, ok = p.str(); !ok {
				return "", false, nil, errors.New("descr is not a quoted string")
			}
		case "fortran_order":
			seen = &haveOrder
			switch {
			case p.word("True"):
				fortran = true
			case p.word("False"):
				fortran = false
			default:
				return "", false, nil, errors.New("fortran_order is not True or False")
			}
		case "shape":
			seen = &haveShape
			if shape, err = p.tuple(); err != nil {
				return "", false, nil, fmt.Errorf("shape: %w", err)
			}
		default:
			return "", false, nil, fmt.Errorf("unknown key %q", key)
		}
		if *seen {
			return "", false, nil, fmt.Errorf("key %q given twice", key)
		}
		*seen = true
		if !p.eat(',') {
			if !p.eat('}') {
				return "", false, nil, fmt.Errorf("want ',' or '}' after the value of %q", key)
			}
			break
		}
	}
	if p.space(); p.i != len(s) {
		return "", false, nil, errors.New("text after the dict")
	}
	if !haveDescr || !haveOrder || !haveShape {
		return "", false, nil, errors.New("want keys 'descr', 'fortran_order' and 'shape'")
	}
	return descr, fortran, shape, nil
}

// scanner reads the restricted Python literals of a header dictionary.
type scanner struct {
	s string
	i int // offset of the next byte
}

// space skips white space.
func (p *scanner) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

// peek returns the next byte after white space, 0 at the end.
func (p *scanner) peek() byte {
	p.space()
	if p.i == len(p.s) {
		return 0
	}
	return p.s[p.i]
}

// eat consumes c, after white space, if it comes next.
func (p *scanner) eat(c byte) bool {
	if p.peek() == c && c != 0 {
		p.i++
		return true
	}
	return false
}

// word consumes w, after white space, if it comes next as a whole word.
func (p *scanner) word(w string) bool {
	p.space()
	if !strings.HasPrefix(p.s[p.i:], w) {
		return false
	}
	if j := p.i + len(w); j < len(p.s) && isIdent(p.s[j]) {
		return false
	}
	p.i += len(w)
	return true
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// str consumes a string in single or double quotes, without escapes.
func (p *scanner) str() (string, bool) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", false
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, true
}

// tuple consumes a tuple of integers: "()", "(5,)", "(5, 36, 2048)".
func (p *scanner) tuple() ([]int64, error) {
	if !p.eat('(') {
		return nil, errors.New("not a tuple")
	}
	shape := []int64{}
	for !p.eat(')') {
		if len(shape) == maxDims {
			return nil, fmt.Errorf("more than %d dimensions", maxDims)
		}
		d, err := p.int()
		if err != nil {
			return nil, err
		}
		shape = append(shape, d)
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, errors.New("want ',' or ')' after a dimension")
			}
			break
		}
	}
	return shape, nil
}

// int consumes a decimal integer of at most 18 digits, which cannot
// overflow an int64, with an optional sign and Python 2's 'L' suffix.
func (p *scanner) int() (int64, error) {
	p.space()
	j := p.i
	if j < len(p.s) && (p.s[j] == '-' || p.s[j] == '+') {
		j++
	}
	k := j
	for k < len(p.s) && '0' <= p.s[k] && p.s[k] <= '9' {
		k++
	}
	if k == j || k-j > 18 {
		return 0, fmt.Errorf("bad dimension at offset %d", p.i)
	}
	v, err := strconv.ParseInt(p.s[p.i:k], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad dimension %q", p.s[p.i:k])
	}
	p.i = k
	if p.i < len(p.s) && p.s[p.i] == 'L' {
		p.i++
	}
	return v, nil
}
