// Command withcontainers is withservers (internal/testenv/withservers) with
// the servers in containers: it starts them through testcontainers-go
// (unless their IDEMQ_* variable already names one), exports their
// addresses in the same IDEMQ_* variables, runs the command, and removes
// the containers when it exits or on SIGINT/SIGTERM. Each server's image is
// the public one unless its IDEMQ_<SERVER>_IMAGE variable names another
// (see package containers).
//
//	cd internal/testenv/containers && go build -o /tmp/withcontainers ./withcontainers
//	cd ../../.. && /tmp/withcontainers -only redis,rocketmq -- make demo-run
//
// It lives in its own module: build it there, run it anywhere.
package main

import (
	"os"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/containers"
)

func main() {
	os.Exit(testenv.WithServers("withcontainers", os.Args[1:], containers.Start))
}
