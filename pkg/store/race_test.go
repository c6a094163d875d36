//go:build race

package store

// raceEnabled: the race detector changes what allocates.
const raceEnabled = true
