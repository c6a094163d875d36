//go:build !mattn

package main

import _ "github.com/ncruces/go-sqlite3/driver" // "sqlite3"

const (
	otherDriver    = "github.com/ncruces/go-sqlite3"
	otherDSNPrefix = "file:"
)
