//go:build !unix

package main

import (
	"os"
	"os/exec"
)

func newGroup(*exec.Cmd) {}

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
