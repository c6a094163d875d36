//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// newGroup puts the launched process in a process group of its own, so that killGroup ends it
// and what it started, and a Ctrl-C at the terminal reaches only the benchmark.
func newGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
