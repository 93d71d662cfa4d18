// Package integration holds end-to-end tests of electord: real gRPC and real
// gossip on 127.0.0.1, in-process clusters (devcluster.Start) and separate
// electord processes built from cmd/electord, driven through the client
// library, electctl and the sidecar HTTP endpoint. It has no non-test code.
//
//	go test -race ./integration/
//
// ELECTORD_TEST_LOG=debug (or info, warn) shows the in-process nodes' logs.
package integration
