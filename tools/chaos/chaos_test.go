package chaos

import (
	"slices"
	"testing"
)

func TestSmallerSideWithout(t *testing.T) {
	for _, c := range []struct {
		a, b   []int
		leader int
		want   []int
	}{
		{[]int{1, 2}, []int{3, 4, 5}, 5, []int{1, 2}}, // the leader's side is larger: the other is touched
		{[]int{3, 4, 5}, []int{1, 2}, 5, []int{1, 2}}, // either order
		{[]int{2}, []int{1, 3, 4, 5}, 4, []int{2}},
		{[]int{1, 2}, []int{3, 4, 5}, 1, nil}, // the leader on the smaller side
		{[]int{1, 2}, []int{3, 4}, 4, nil},    // equal sides: no majority side
		{[]int{1, 2}, []int{3, 4, 5}, 0, nil}, // no leader known
	} {
		if got := smallerSideWithout(c.a, c.b, c.leader); !slices.Equal(got, c.want) {
			t.Errorf("%v | %v, leader %d: got %v, want %v", c.a, c.b, c.leader, got, c.want)
		}
	}
}
