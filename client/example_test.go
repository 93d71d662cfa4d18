package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/electord/electord/api"
	"github.com/electord/electord/api/apitest"
	"github.com/electord/electord/client"
)

// demo starts a fake three-node cluster in this process, node 3 leading,
// and serves node 1's Elector API on 127.0.0.1 at a free port: the address
// a program would give client.New. A real program talks to electord
// instead.
func demo() (cluster *apitest.Cluster, addr string, stop func()) {
	cluster = apitest.NewCluster(3)
	cluster.Elect(3)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := api.NewGRPCServer(cluster.Node(1))
	go srv.Serve(lis)
	cluster.SetAPIAddr(1, lis.Addr().String())
	return cluster, lis.Addr().String(), srv.Stop
}

func ExampleClient_Leader() {
	_, addr, stop := demo()
	defer stop()

	c, err := client.New(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	li, err := c.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader %d (%s) in term %s; this node is a %s\n", li.ID, li.Name, li.Term, li.State)
	// Output: leader 3 (node-3) in term 1.3; this node is a follower
}

func ExampleClient_IsLeader() {
	_, addr, stop := demo()
	defer stop()

	// A program next to its own electord asks that one node.
	c, err := client.New(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	lead, err := c.IsLeader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading:", lead)
	// Output: leading: false
}

func ExampleClient_Watch() {
	cluster, addr, stop := demo()
	defer stop()

	c, err := client.New(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	n := 0
	for ev := range c.Watch(ctx) {
		if ev.Err != nil {
			fmt.Println("watch:", ev.Err) // Watch retries by itself
			continue
		}
		fmt.Printf("#%d leader %d in term %s (self: %v)\n", ev.Seq, ev.Leader.ID, ev.Leader.Term, ev.Leader.Self)
		n++
		switch n {
		case 1:
			cluster.Elect(1) // leadership moves to the watched node
		case 2:
			cancel() // the channel closes
		}
	}
	// Output:
	// #1 leader 3 in term 1.3 (self: false)
	// #2 leader 1 in term 2.1 (self: true)
}

func ExampleNewWithOptions() {
	_, addr, stop := demo()
	defer stop()

	// The first endpoint has nothing listening: the second answers.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	dead.Close()
	c, err := client.NewWithOptions([]string{dead.Addr().String(), addr}, client.WithDialTimeout(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	li, err := c.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", li.Name)
	// Output: leader: node-3
}
