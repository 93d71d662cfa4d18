package main

// --streams one: each candidate app holds all its candidacies on ONE stream
// (the Go client's CampaignMany).

import (
	"context"

	"github.com/electord/electord/client"
)

func init() { standModes["one"] = newOneStream }

// oneStream is a candidate app with one CampaignMany per stand (one
// client, one connection, one stream).
type oneStream struct {
	api, value string
	opts       []client.CampaignOption
	cl         *client.Client
	cs         *client.Campaigns
}

func newOneStream(api, value string, opts []client.CampaignOption) candidateApp {
	return &oneStream{api: api, value: value, opts: opts}
}

func (s *oneStream) stand(ctx context.Context, names []string) error {
	cl, err := client.New(s.api)
	if err != nil {
		return err
	}
	s.cl = cl
	s.cs, err = cl.CampaignMany(ctx, names, s.value, s.opts...)
	return err
}

func (s *oneStream) close() {
	if s.cs != nil {
		s.cs.Close()
	}
	if s.cl != nil {
		s.cl.Close()
	}
}

func (s *oneStream) crash() {
	if s.cl != nil {
		s.cl.Close()
	}
}
