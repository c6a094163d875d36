//go:build race

package cmd_test

// raceEnabled: the race detector slows the pure-Go SQLite driver many times.
const raceEnabled = true
