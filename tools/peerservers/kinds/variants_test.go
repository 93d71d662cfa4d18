package kinds

import (
	"errors"
	"runtime"
	"testing"

	"google.golang.org/grpc"

	"github.com/electord/electord/transport/lf/lftest/echo"
)

// TestVariantKinds: with the lfvariant tag every variant kind serves Echo;
// without it Start refuses them with ErrNoVariants, which says how to get
// them.
func TestVariantKinds(t *testing.T) {
	for _, kind := range VariantKinds {
		t.Run(kind, func(t *testing.T) {
			if !variantsBuilt {
				_, _, err := Start(kind, func(r grpc.ServiceRegistrar) { echo.RegisterServer(r, new(echo.Server)) }, Options{})
				if !errors.Is(err, ErrNoVariants) {
					t.Fatalf("Start(%s) without -tags lfvariant: %v, want ErrNoVariants", kind, err)
				}
				return
			}
			if runtime.GOOS != "linux" {
				t.Skip("the pool runs on Linux only")
			}
			s := start(t, kind, Options{Workers: 4})
			cc, _ := dial(t, s.addr)
			mustEcho(t, cc, 100)
			mustEcho(t, cc, 70<<10)
		})
	}
}
