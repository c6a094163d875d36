//go:build mattn

package main

import _ "github.com/mattn/go-sqlite3" // "sqlite3", needs cgo

const (
	otherDriver    = "github.com/mattn/go-sqlite3"
	otherDSNPrefix = ""
)
