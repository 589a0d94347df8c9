package main

import (
	"cmp"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opmodel/pipeline/engine/lock"
	"github.com/opmodel/pipeline/pipeline"
)

// lockFlags are the release lock's flags of apply, prune and delete.
type lockFlags struct {
	timeout time.Duration
	lease   time.Duration
	holder  string
}

func (l *lockFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&l.timeout, "lock-timeout", lock.DefaultTimeout, "how long to wait while another run holds the release's lock (0: fail at once)")
	fs.StringVar(&l.holder, "lock-holder", "", "who this run is, shown to runs that wait for it (default: the CI run URL, else user@host)")
	// Tests shorten the lease so a killed holder's lock expires quickly.
	fs.DurationVar(&l.lease, "lock-lease-duration", lock.DefaultLeaseDuration, "how long the lock outlives a holder that stopped renewing it")
	_ = fs.MarkHidden("lock-lease-duration")
}

func (l *lockFlags) locking(cmd *cobra.Command) (pipeline.Locking, error) {
	if l.timeout < 0 {
		return pipeline.Locking{}, usageError{fmt.Errorf("--lock-timeout must not be negative, not %s", l.timeout)}
	}
	if l.lease < time.Second {
		return pipeline.Locking{}, usageError{fmt.Errorf("--lock-lease-duration must be at least 1s, not %s", l.lease)}
	}
	w := cmd.ErrOrStderr()
	return pipeline.Locking{
		Holder: cmp.Or(l.holder, lock.HolderFrom(getenv(cmd))), LockTimeout: l.timeout, NoLockWait: l.timeout == 0, LeaseDuration: l.lease,
		LockWaiting: func(h pipeline.LockHolder) {
			fmt.Fprintf(w, "waiting for the release lock (Lease %s/%s): held by %s; waiting up to %s (--lock-timeout)\n", h.Namespace, h.Name, h, l.timeout)
		},
		LockTakenOver: func(h pipeline.LockHolder) {
			fmt.Fprintf(w, "Warning: took over the release lock (Lease %s/%s) from %s, which stopped renewing it (killed?); what it was doing may be half done, and this run applies and records the whole release\n", h.Namespace, h.Name, h)
		},
	}, nil
}

func newUnlockCmd() *cobra.Command {
	var (
		cluster clusterFlags
		opts    pipeline.UnlockOptions
	)
	cmd := &cobra.Command{
		Use:     "unlock RELEASE -n NS | --release-id ID -n NS",
		Example: `  opm unlock blog -n staging`,
		Short:   "Break a release's lock by hand",
		Long: `Delete the Lease that locks a release (held by apply, prune and delete from before
they read the inventory until after they write it), and print who held it. Use it
when the holder died and waiting for its lease to expire is not wanted; a holder
still running notices at its next renewal and stops before pruning or writing the
inventory.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if opts.Namespace == "" || (opts.Name == "" && opts.ReleaseID == "") {
				return usageError{fmt.Errorf("give the release name (or --release-id) and --namespace")}
			}
			opts.ClusterOptions = cluster.options()
			res, err := pipeline.Unlock(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if !res.Held {
				fmt.Fprintf(cmd.OutOrStdout(), "release %s in %s is not locked\n", opts.Name+opts.ReleaseID, opts.Namespace)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "unlocked: Lease %s/%s was held by %s (last renewed %s)\n",
				opts.Namespace, res.Lease, res.Holder, res.Holder.Renewed.UTC().Format(time.RFC3339))
			return nil
		},
	}
	cluster.register(cmd.Flags())
	cmd.Flags().StringVarP(&opts.Namespace, "namespace", "n", "", "the release's namespace")
	cmd.Flags().StringVar(&opts.ReleaseID, "release-id", "", "the release id (when several releases share the name)")
	return cmd
}
