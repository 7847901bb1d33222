package config

import (
	"fmt"
	"strings"
)

// suggest returns the known key closest to key when it is close enough to
// be a typo (an edit distance of at most a third of its length, at least
// 1, ignoring case, "-" and "_"), else "".
func suggest(key string, known []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	k := norm(key)
	best, bestDist := "", -1
	for _, c := range known {
		d := editDistance(k, norm(c))
		if d <= max(1, len([]rune(c))/3) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// unknownKeyMessage says that key is not a known key and which one was
// probably meant.
func unknownKeyMessage(key, suggestion string) string {
	return fmt.Sprintf("unknown key '%s' (did you mean '%s'?)", key, suggestion)
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
