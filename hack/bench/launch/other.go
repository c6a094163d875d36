//go:build !unix

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "launch: peak RSS is measured on Linux only")
	os.Exit(2)
}
