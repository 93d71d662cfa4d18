package sim

import (
	"testing"
)

func TestSmoke(t *testing.T) {
	for _, algo := range []string{"ring", "bully"} {
		for _, q := range []bool{false, true} {
			s, err := New(Options{N: 5, Algorithm: algo, Quorum: q, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			ok, err := s.RunUntil(200, func() bool { _, _, ok := s.Agreed(); return ok })
			if err != nil || !ok {
				t.Fatalf("%s q=%v: agreed=%v err=%v %s", algo, q, ok, err, s.Describe())
			}
			l, term, _ := s.Agreed()
			t.Logf("%s q=%v leader=%d term=%v at tick %d msgs=%v", algo, q, l, term, s.Now(), s.Counts)
			s.Crash(l)
			ok, err = s.RunUntil(200, func() bool { _, _, ok := s.Agreed(); return ok })
			if err != nil || !ok {
				t.Fatalf("%s q=%v after crash: agreed=%v err=%v %s", algo, q, ok, err, s.Describe())
			}
			l, term, _ = s.Agreed()
			t.Logf("  after crash leader=%d term=%v at tick %d", l, term, s.Now())
		}
	}
}
