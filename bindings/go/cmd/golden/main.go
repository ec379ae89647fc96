// Command golden runs the golden scenario (internal/golden) for the 2-process comparison.
package main

import (
	"fmt"
	"os"

	"github.com/accelerate-cpp/accelerate/go/internal/golden"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: golden OUT_FILE")
		os.Exit(2)
	}
	if _, err := golden.Run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
