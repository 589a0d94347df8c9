package inventory

// Source is where a change came from, as far as it is known: the git
// state of the deployment directory it was rendered from and the CI run
// that applied it. Rollback renders Commit again.
type Source struct {
	Commit string `json:"commit,omitempty"`
	// Ref is the branch or tag the commit was checked out as.
	Ref string `json:"ref,omitempty"`
	// Dirty is true when the deployment directory had changes the commit
	// does not hold: the commit alone does not reproduce the change.
	Dirty bool `json:"dirty,omitempty"`
	// RunURL is the CI run that applied the change.
	RunURL string `json:"runUrl,omitempty"`
	// GatesSkippedBy names who applied with --skip-gates: the promotion
	// gates of the environment were not checked for this change.
	GatesSkippedBy string `json:"gatesSkippedBy,omitempty"`
}
