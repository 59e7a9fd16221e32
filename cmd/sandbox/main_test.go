package main

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// envChild makes the test binary act as a child process for the tests
// instead of running them: "ignore-term" sleeps with SIGTERM ignored.
const envChild = "NODEWRIGHT_SANDBOX_TEST_CHILD"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		// `up` starts its own executable with "serve": in a test that is
		// this binary, which must not run the tests again.
		os.Exit(3)
	}
	if os.Getenv(envChild) == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
