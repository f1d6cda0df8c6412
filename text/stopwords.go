package text

import "strings"

// stopWordList is NLTK's English stop-word list (nltk_data
// corpora/stopwords/english, the 179-word version), in its original order.
var stopWordList = [...]string{
	"i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you",
	"you're", "you've", "you'll", "you'd", "your", "yours", "yourself",
	"yourselves", "he", "him", "his", "himself", "she", "she's", "her", "hers",
	"herself", "it", "it's", "its", "itself", "they", "them", "their",
	"theirs", "themselves", "what", "which", "who", "whom", "this", "that",
	"that'll", "these", "those", "am", "is", "are", "was", "were", "be", "been",
	"being", "have", "has", "had", "having", "do", "does", "did", "doing", "a",
	"an", "the", "and", "but", "if", "or", "because", "as", "until", "while",
	"of", "at", "by", "for", "with", "about", "against", "between", "into",
	"through", "during", "before", "after", "above", "below", "to", "from",
	"up", "down", "in", "out", "on", "off", "over", "under", "again",
	"further", "then", "once", "here", "there", "when", "where", "why", "how",
	"all", "any", "both", "each", "few", "more", "most", "other", "some",
	"such", "no", "nor", "not", "only", "own", "same", "so", "than", "too",
	"very", "s", "t", "can", "will", "just", "don", "don't", "should",
	"should've", "now", "d", "ll", "m", "o", "re", "ve", "y", "ain", "aren",
	"aren't", "couldn", "couldn't", "didn", "didn't", "doesn", "doesn't",
	"hadn", "hadn't", "hasn", "hasn't", "haven", "haven't", "isn", "isn't",
	"ma", "mightn", "mightn't", "mustn", "mustn't", "needn", "needn't", "shan",
	"shan't", "shouldn", "shouldn't", "wasn", "wasn't", "weren", "weren't",
	"won", "won't", "wouldn", "wouldn't",
}

var stopWords = func() map[string]struct{} {
	m := make(map[string]struct{}, len(stopWordList))
	for _, w := range stopWordList {
		m[w] = struct{}{}
	}
	return m
}()

// StopWords returns NLTK's English stop-word list, lower case, in its
// original order.
func StopWords() []string { return append([]string(nil), stopWordList[:]...) }

// IsStopWord reports whether word is in NLTK's English stop-word list,
// ignoring case.
func IsStopWord(word string) bool {
	if _, ok := stopWords[word]; ok {
		return true
	}
	_, ok := stopWords[strings.ToLower(word)]
	return ok
}

// StopWordMask reports, for each WordPiece token, whether it belongs to a
// stop word. A word is a token followed by its "##" continuations; all its
// pieces get the verdict of the whole word ("the" "##ir" is "their", a stop
// word, while "a" "##ble" is "able", not one). words holds the word index of
// each token, as returned with the tokens; a continuation only joins the
// word before it when the two have the same index, and tokens with index -1
// ([CLS], [SEP], padding) are never stop words. words may be nil, in which
// case continuations always join.
//
// Punctuation is a word of its own and is not a stop word; "don't" is
// "don" "'" "t", of which "don" and "t" are stop words.
func StopWordMask(tokens []string, words []int32) []bool {
	if words != nil && len(words) != len(tokens) {
		panic("text: StopWordMask: tokens and words differ in length")
	}
	mask := make([]bool, len(tokens))
	var sb strings.Builder
	for i := 0; i < len(tokens); {
		if words != nil && words[i] < 0 {
			i++
			continue
		}
		// The word is tokens[i:j].
		j := i + 1
		for j < len(tokens) && strings.HasPrefix(tokens[j], "##") && (words == nil || words[j] == words[i]) {
			j++
		}
		w := tokens[i]
		if j > i+1 {
			sb.Reset()
			sb.WriteString(w)
			for _, t := range tokens[i+1 : j] {
				sb.WriteString(t[2:])
			}
			w = sb.String()
		}
		if IsStopWord(w) {
			for k := i; k < j; k++ {
				mask[k] = true
			}
		}
		i = j
	}
	return mask
}
