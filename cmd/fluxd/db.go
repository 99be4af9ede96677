package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	historystore "github.com/fluxd/fluxd/history/store"
)

func newDBCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Manage the history database",
	}
	cmd.AddCommand(newDBCopyCommand())
	return cmd
}

// dbCopyFlags are 'fluxd db copy's flags.
type dbCopyFlags struct {
	from, to                         string
	fromPasswordFile, toPasswordFile string
}

func newDBCopyCommand() *cobra.Command {
	var f dbCopyFlags
	cmd := &cobra.Command{
		Use:   "copy --from SOURCE --to TARGET",
		Short: "Copy history, jobs and the registry cache from one database to another",
		Long: `Copy moves fluxd's records to another database, e.g. from the SQLite file of a
single replica to the PostgreSQL database several replicas will share:

  fluxd db copy --from sqlite:///var/lib/fluxd/history.db \
      --to postgres://fluxd@db:5432/fluxd?sslmode=require --to-password-file pw

Every event, job, cached registry tag, promotion row and image signature
verification result is copied, oldest first. The source
is only read: it must be at this fluxd's schema version (start this fluxd on it
once to upgrade it). The target must be empty (it is migrated first), so
nothing is mixed or copied twice.
Stop fluxd before copying: what it records meanwhile would not be copied.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return copyDB(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().StringVar(&f.from, "from", "", "the database to copy from: a SQLite path, sqlite:///path or postgres://... (required)")
	cmd.Flags().StringVar(&f.to, "to", "", "the empty database to copy into (required)")
	cmd.Flags().StringVar(&f.fromPasswordFile, "from-password-file", "", "file holding --from's PostgreSQL password (default: $PGPASSWORD)")
	cmd.Flags().StringVar(&f.toPasswordFile, "to-password-file", "", "file holding --to's PostgreSQL password (default: $PGPASSWORD)")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func copyDB(ctx context.Context, w io.Writer, f dbCopyFlags) error {
	if f.from == f.to {
		return fmt.Errorf("--from and --to are the same database (%s)", historystore.Redact(f.from))
	}
	// The source is read as it is: copying must not change it.
	from, err := historystore.Open(ctx, historystore.Config{URL: f.from, PasswordFile: f.fromPasswordFile, NoMigrate: true})
	if err != nil {
		return fmt.Errorf("opening --from: %w", err)
	}
	defer from.Close()
	to, err := historystore.Open(ctx, historystore.Config{URL: f.to, PasswordFile: f.toPasswordFile})
	if err != nil {
		return fmt.Errorf("opening --to: %w", err)
	}
	defer to.Close()
	n, err := historystore.Copy(ctx, from, to)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "copied %d events, %d jobs (%d log lines), %d cached tags of %d repositories and %d bundles (%d stage records, %d pauses) and %d verification results from %s to %s\n",
		n.Events, n.Jobs, n.JobLogLines, n.Tags, n.Repositories, n.Bundles, n.PromotionRecords, n.Pauses, n.VerificationResults, historystore.Redact(f.from), historystore.Redact(f.to))
	return nil
}
