package main

// blankText says why s, a sentence that text.Blank calls blank, is: the
// one rule for blank captions and queries, which --text shares with
// caption files, Karpathy files and indexes.
func blankText(s string) string {
	if s == "" {
		return "it is empty"
	}
	return "it holds nothing but spaces, control or invisible characters (such as a byte order mark or zero-width spaces)"
}
