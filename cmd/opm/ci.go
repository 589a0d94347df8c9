package main

import (
	"fmt"
	"strings"
)

// ciRunURL is the URL of the CI run opm runs in, recorded with each
// change it applies: GitHub Actions' (GITHUB_SERVER_URL, GITHUB_REPOSITORY,
// GITHUB_RUN_ID), GitLab's CI_PIPELINE_URL, or "" outside CI.
func ciRunURL(getenv func(string) string) string {
	server, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
	if server != "" && repo != "" && id != "" {
		return fmt.Sprintf("%s/%s/actions/runs/%s", strings.TrimSuffix(server, "/"), repo, id)
	}
	return getenv("CI_PIPELINE_URL")
}
