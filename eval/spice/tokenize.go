package spice

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/xmr-project/xmr/eval/spice/internal/wordnet"
)

// maxTokens bounds the work on one caption; captions are about 10 words,
// and longer inputs are cut.
const maxTokens = 256

// tokenize lower-cases a caption and splits it into words and punctuation:
// clitics are split off ("man's" -> "man" "'s", "isn't" -> "is" "n't"),
// "&" becomes "and", hyphenated words stay whole when WordNet knows them
// ("t-shirt") or they read as one modifier ("long-haired"), and are split
// otherwise.
func tokenize(db *wordnet.DB, s string) []string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, " ")
	}
	s = strings.ToLower(s)
	var toks []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			toks = appendWord(db, toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		if len(toks) >= maxTokens {
			break
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '\'' || r == '\u2019':
			if r == '\u2019' {
				r = '\''
			}
			cur.WriteRune(r)
		case r == '&':
			flush()
			toks = append(toks, "and")
		case r == '.' || r == '!' || r == '?':
			flush()
			toks = append(toks, ".")
		case r == ',' || r == ';' || r == ':':
			flush()
			toks = append(toks, ",")
		default:
			flush()
		}
	}
	flush()
	if len(toks) > maxTokens {
		toks = toks[:maxTokens]
	}
	return toks
}

// appendWord appends the tokens of one whitespace- and punctuation-free word.
func appendWord(db *wordnet.DB, toks []string, w string) []string {
	w = strings.TrimLeft(strings.TrimRight(w, "-"), "-'")
	if strings.HasSuffix(w, "s'") && len(w) > 2 { // dogs'
		return append(appendWord(db, toks, w[:len(w)-1]), "'s")
	}
	w = strings.Trim(w, "-'")
	if w == "" {
		return toks
	}
	if i := strings.IndexByte(w, '\''); i >= 0 {
		switch suf := w[i:]; {
		case suf == "'s":
			return append(appendWord(db, toks, w[:i]), "'s")
		case strings.HasSuffix(w, "n't"):
			base := strings.TrimSuffix(w, "n't")
			switch base {
			case "ca":
				base = "can"
			case "wo":
				base = "will"
			}
			return append(appendWord(db, toks, base), "not")
		case suf == "'re":
			return append(appendWord(db, toks, w[:i]), "are")
		case suf == "'m":
			return append(appendWord(db, toks, w[:i]), "am")
		case suf == "'ll":
			return append(appendWord(db, toks, w[:i]), "will")
		case suf == "'ve":
			return append(appendWord(db, toks, w[:i]), "have")
		case suf == "'d":
			return append(appendWord(db, toks, w[:i]), "would")
		}
		w = strings.ReplaceAll(w, "'", "")
		if w == "" {
			return toks
		}
	}
	if strings.IndexByte(w, '-') < 0 {
		return append(toks, w)
	}
	// Hyphenated: keep when WordNet knows it (t-shirt, double-decker, or as a
	// collocation close_up) or when it is one modifier (long-haired).
	if known(db, w) || known(db, strings.ReplaceAll(w, "-", "_")) {
		return append(toks, w)
	}
	parts := strings.FieldsFunc(w, func(r rune) bool { return r == '-' })
	if len(parts) == 2 && (strings.HasSuffix(w, "ed") || strings.HasSuffix(w, "ing")) && !numbers[parts[0]] {
		return append(toks, w)
	}
	return append(toks, parts...)
}

func known(db *wordnet.DB, w string) bool {
	for p := wordnet.Noun; p < wordnet.NumPOS; p++ {
		if _, ok := db.Base(w, p); ok {
			return true
		}
	}
	return false
}

// respellings normalise caption spellings to WordNet lemmas.
var respellings = map[string]string{
	"close up": "closeup", "close-up": "closeup", "cell phone": "cellphone", "cell phones": "cellphones",
	"t shirt": "t-shirt", "tshirt": "t-shirt", "t shirts": "t-shirts", "tshirts": "t-shirts",
	"tee shirt": "t-shirt", "grey": "gray", "colour": "color", "coloured": "colored",
	"frisbe": "frisbee", "skate board": "skateboard", "surf board": "surfboard",
	"snow board": "snowboard", "tv": "television", "donut": "doughnut", "donuts": "doughnuts",
	"skiis": "skis", "ski's": "skis", "doughnut's": "doughnuts", "sandwhich": "sandwich",
	"motor cycle": "motorcycle", "motor bike": "motorbike", "fire hydrent": "fire hydrant",
	"laying": "lying", "lays": "lies", "double decker": "double-decker", "counter top": "countertop",
	"counter tops": "countertops", "stop light": "stoplight", "stop lights": "stoplights",
}

// adjCollocations are WordNet noun collocations that begin with an
// adjective-dominant word and still name one object in captions.
var adjCollocations = set("hot_dog", "living_room", "dining_room", "dining_table", "high_chair",
	"french_fries", "french_toast", "hot_sauce", "red_wine", "white_wine", "green_bean", "bald_eagle",
	"polar_bear", "brown_bear", "black_bear", "grizzly_bear", "double_bed", "flat_screen", "solar_panel")

// respell applies respellings over one- and two-token windows.
func respell(toks []string) []string {
	out := toks[:0]
	for i := 0; i < len(toks); i++ {
		if i+1 < len(toks) {
			if r, ok := respellings[toks[i]+" "+toks[i+1]]; ok {
				out = append(out, r)
				i++
				continue
			}
		}
		if r, ok := respellings[toks[i]]; ok {
			out = append(out, r)
			continue
		}
		out = append(out, toks[i])
	}
	return out
}
