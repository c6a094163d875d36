//go:build race

package monitor

// raceEnabled: the race detector slows the pure-Go SQLite driver many times.
const raceEnabled = true
