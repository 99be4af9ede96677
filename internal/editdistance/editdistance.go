// Package editdistance ranks strings by how close they are to a target,
// for "did you mean" suggestions in error messages.
package editdistance

import "sort"

// Levenshtein is the number of single-character edits between a and b.
func Levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Closest returns up to n of candidates nearest to want, nearest first
// (ties in candidates' order).
func Closest(want string, candidates []string, n int) []string {
	type scored struct {
		s    string
		dist int
	}
	c := make([]scored, 0, len(candidates))
	for _, s := range candidates {
		c = append(c, scored{s, Levenshtein(want, s)})
	}
	sort.SliceStable(c, func(i, j int) bool { return c[i].dist < c[j].dist })
	var out []string
	for i := 0; i < len(c) && i < n; i++ {
		out = append(out, c[i].s)
	}
	return out
}
