package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SetCluster records the cluster identity of a record's workload (see
// migrations/0004_cluster.sql); an empty cluster removes it.
func (s *Store) SetCluster(ctx context.Context, runtimeID, cluster string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if cluster == "" {
			_, err := tx.ExecContext(ctx, "DELETE FROM clusters WHERE runtime_id = ?", runtimeID)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO clusters (runtime_id, cluster) VALUES (?, ?)
ON CONFLICT (runtime_id) DO UPDATE SET cluster = excluded.cluster`, runtimeID, cluster)
		return err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("set the cluster of %q", runtimeID), err)
	}
	return nil
}

// Cluster returns the recorded cluster identity of a record's workload, ""
// when none is recorded.
func (s *Store) Cluster(ctx context.Context, runtimeID string) (string, error) {
	var c string
	err := s.db.QueryRowContext(ctx, "SELECT cluster FROM clusters WHERE runtime_id = ?", runtimeID).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", s.fail(fmt.Sprintf("read the cluster of %q", runtimeID), err)
	}
	return c, nil
}

// Clusters returns the recorded cluster identities of the runtime IDs that
// have one.
func (s *Store) Clusters(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, "SELECT runtime_id, cluster FROM clusters WHERE runtime_id IN (?"+strings.Repeat(", ?", len(chunk)-1)+")", args...)
		if err != nil {
			return nil, s.fail("read clusters", err)
		}
		for rows.Next() {
			var id, c string
			if err := rows.Scan(&id, &c); err != nil {
				rows.Close()
				return nil, s.fail("read clusters", err)
			}
			out[id] = c
		}
		if err := rows.Close(); err != nil {
			return nil, s.fail("read clusters", err)
		}
		if err := rows.Err(); err != nil {
			return nil, s.fail("read clusters", err)
		}
	}
	return out, nil
}
