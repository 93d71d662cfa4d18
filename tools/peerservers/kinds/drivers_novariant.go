//go:build !lfvariant

package kinds

import "google.golang.org/grpc"

// Without the lfvariant tag the variant kinds exist only to say how to get
// them.
func init() {
	for _, k := range VariantKinds {
		engineKinds[k] = func(func(grpc.ServiceRegistrar), Options) (Server, error) {
			return nil, ErrNoVariants
		}
	}
}

// variantsBuilt says whether the variant kinds are compiled in.
const variantsBuilt = false
