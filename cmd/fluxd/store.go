package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	historystore "github.com/fluxd/fluxd/history/store"
	"github.com/fluxd/fluxd/internal/auth"
)

// openStore opens the history store, after making --state-dir. A
// PostgreSQL server that is down is waited for in the background (fluxd
// reports not ready meanwhile); a SQLite file opens now.
func openStore(ctx context.Context, stateDir string, cfg historystore.Config, health *startupHealth, log *slog.Logger) (*historystore.Connecting, error) {
	health.starting("opening the history database")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating --state-dir: %w", err)
	}
	store, err := historystore.Start(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	log.Info("history database", "component", "history", "db", historystore.Redact(cfg.URL))
	return store, nil
}

// openTokens reads the API's tokens, warning of instances without a scope.
func openTokens(file string, log *slog.Logger) (*auth.Store, error) {
	tokens, err := auth.Open(file)
	if err != nil {
		return nil, err
	}
	warnUnscoped(tokens.Instances(), log)
	return tokens, nil
}
