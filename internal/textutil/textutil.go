// Package textutil holds the harness's small text helpers, shared by spec and the strict JSON
// reader so that a misspelt name is judged the same way everywhere.
package textutil

// EditDistance is the number of single-byte edits that turn a into b: insertions, deletions and
// substitutions (Levenshtein), and, when swaps is true, transpositions of two adjacent bytes
// each counted as one edit (the optimal string alignment distance).
func EditDistance(a, b string, swaps bool) int {
	// rows[0] is row i-2, rows[1] row i-1, rows[2] row i of the table.
	var rows [3][]int
	for k := range rows {
		rows[k] = make([]int, len(b)+1)
	}
	for j := range rows[1] {
		rows[1][j] = j
	}
	for i := 1; i <= len(a); i++ {
		prev2, prev, cur := rows[0], rows[1], rows[2]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if swaps && i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		rows[0], rows[1], rows[2] = prev, cur, prev2
	}
	return rows[1][len(b)]
}
