package data

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/xmr-project/xmr/text"
)

// CheckCaption says what is wrong with c as a caption of a data set, or
// returns nil. A caption must hold something to read (not text.Blank:
// spaces, control characters, a byte order mark or zero-width characters
// alone are blank) and no line break (a caption file holds one caption a
// line). A blank caption has no word to encode, so it would have no
// vectors and score 0 against every image: in an index of a model whose
// scores are mostly negative it would come first in every search.
func CheckCaption(c string) error {
	if text.Blank(c) {
		return errors.New("is blank (nothing but spaces, control or invisible characters such as a byte order mark or zero-width spaces)")
	}
	if i := strings.IndexAny(c, "\r\n"); i >= 0 {
		return fmt.Errorf("holds a line break (%U) at byte %d: a caption file holds one caption a line", rune(c[i]), i)
	}
	return nil
}

// CheckImageID says what is wrong with id as an image's id in a data set
// ({split}_ids.txt, one id a line, read back with the white space around
// it trimmed), or returns nil. An id must not be empty or blank (no API
// could name the image), must hold no control character (a line break
// would split it in two in the ids file), and must not start or end with
// white space (the ids file's reader drops it, and the id read back would
// be another).
func CheckImageID(id string) error {
	switch {
	case id == "":
		return errors.New("is empty")
	case text.Blank(id):
		return errors.New("is blank (nothing but spaces, control or invisible characters)")
	}
	for i, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("holds the control character %U at byte %d (a line break or a tab cannot be written in an ids file)", r, i)
		}
	}
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return errors.New("starts or ends with white space, which the reader of an ids file drops")
	}
	return nil
}
