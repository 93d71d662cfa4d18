package api_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	electordv1 "github.com/electord/electord/proto/electord/v1"
	"github.com/electord/electord/security"
)

// With TLS on, CampaignMany needs a client certificate of the cluster, as
// Campaign does: without one the connection is refused; with a client
// identity the call passes the interceptor (this fake node serves no
// named elections, so it answers Unimplemented, not PermissionDenied).
func TestSecureCampaignManyNeedsCertificate(t *testing.T) {
	sc := serveSecure(t)
	req := &electordv1.CampaignManyRequest{Elections: []string{"shard-0", "shard-1"}, Value: "v"}
	recv := func(cl electordv1.ElectorClient) error {
		s, err := cl.CampaignMany(ctx(t), req)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":           insecure.NewCredentials(),
		"TLS, no client cert": credentials.NewTLS(sc.pki.material(t, "", "", 0, -1).ClientConfig()),
	} {
		if err := recv(dialWith(t, sc.addr[1], creds)); grpcstatus.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want Unavailable (the connection is refused)", name, err)
		}
	}
	if err := recv(sc.as(t, security.RoleClient, "web")); grpcstatus.Code(err) != codes.Unimplemented {
		t.Errorf("as a client: %v, want Unimplemented (authorized; this fake serves no named elections)", err)
	}
	if got := sc.sec[1].Denied(); got != 0 {
		t.Errorf("Denied() = %d, want 0", got)
	}
}
