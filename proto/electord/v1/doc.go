// Package electordv1 holds the generated Go code for the electord.v1
// protobuf package: the node-to-node Peer service (peer.proto) and the
// client-facing Elector service (elector.proto).
//
// Do not edit the *.pb.go files by hand; change the .proto files and run
// `make proto` (or `go generate ./proto/...`) from the repository root.
// See docs/PROTO.md.
package electordv1

//go:generate make -C ../../.. proto
