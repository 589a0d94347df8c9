#!/usr/bin/env bash
# The released opm-action binary for the ref this Action runs at, so a
# tagged Action does not compile Go (action.yml runs this).
#
#   release.sh resolve    ACTION_REF, ACTION_REPOSITORY, GITHUB_API_URL,
#                         GITHUB_TOKEN → "version=vX.Y.Z" (or empty: build
#                         from source) in GITHUB_OUTPUT
#   release.sh download   VERSION, ACTION_REPOSITORY, GITHUB_SERVER_URL,
#                         RUNNER_OS, RUNNER_ARCH, DEST → DEST/opm-action,
#                         after checking the archive against checksums.txt
#
# A version tag (v1.2.3) is its own release. A moving tag (v1, v1.2) is the
# highest version tag on the same commit, found with the tags API. Any
# other ref (a branch, a commit, `uses: ./`) builds from source.
set -euo pipefail

fail() {
	echo "::error::$*" >&2
	exit 1
}

resolve() {
	local ref="${ACTION_REF:-}" version=""
	if [[ "$ref" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
		version="$ref"
	elif [[ "$ref" =~ ^v[0-9]+(\.[0-9]+)?$ && -n "${ACTION_REPOSITORY:-}" ]]; then
		local tags
		if tags=$(list_tags); then
			version=$(jq -r --arg ref "$ref" '
				(map(select(.name == $ref)) | .[0].commit.sha) as $sha
				| map(select(.commit.sha == $sha and (.name | test("^v[0-9]+\\.[0-9]+\\.[0-9]+$"))) | .name)
				| sort_by(ltrimstr("v") | split(".") | map(tonumber)) | last // ""' <<<"$tags")
		else
			echo "::warning::could not list the tags of $ACTION_REPOSITORY; building the opm Action from source"
		fi
	fi
	if [[ -n "$version" ]]; then
		echo "The opm Action at $ref is release $version: downloading it"
	else
		echo "The opm Action at ${ref:-a local path} is not a release: building it from source"
	fi
	echo "version=$version" >>"$GITHUB_OUTPUT"
}

# list_tags prints every tag of the repository as one JSON array.
list_tags() {
	local page=1 all="[]" batch
	local auth=()
	if [[ -n "${GITHUB_TOKEN:-}" ]]; then
		auth=(-H "Authorization: Bearer $GITHUB_TOKEN")
	fi
	while :; do
		batch=$(curl -fsSL --retry 3 ${auth[@]+"${auth[@]}"} -H "Accept: application/vnd.github+json" \
			"${GITHUB_API_URL%/}/repos/$ACTION_REPOSITORY/tags?per_page=100&page=$page") || return 1
		[[ $(jq length <<<"$batch") -gt 0 ]] || break
		all=$(jq -c --argjson b "$batch" '. + $b' <<<"$all")
		page=$((page + 1))
	done
	printf '%s' "$all"
}

download() {
	local os arch ext bin=opm-action
	case "$RUNNER_OS" in
	Linux) os=linux ;;
	macOS) os=darwin ;;
	Windows) os=windows bin=opm-action.exe ;;
	*) fail "no opm release for runner OS $RUNNER_OS" ;;
	esac
	case "$RUNNER_ARCH" in
	X64) arch=amd64 ;;
	ARM64) arch=arm64 ;;
	*) fail "no opm release for runner architecture $RUNNER_ARCH" ;;
	esac
	ext=tar.gz
	[[ $os == windows ]] && ext=zip
	local name="opm_${VERSION#v}_${os}_${arch}.${ext}"
	local base="${GITHUB_SERVER_URL%/}/$ACTION_REPOSITORY/releases/download/$VERSION"
	local tmp
	tmp=$(mktemp -d)
	curl -fsSL --retry 3 -o "$tmp/$name" "$base/$name" || fail "downloading $base/$name failed"
	curl -fsSL --retry 3 -o "$tmp/checksums.txt" "$base/checksums.txt" || fail "downloading $base/checksums.txt failed"
	local want got
	want=$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1 }' "$tmp/checksums.txt")
	[[ -n "$want" ]] || fail "checksums.txt of $VERSION lists no $name"
	if command -v sha256sum >/dev/null; then
		got=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
	else
		got=$(shasum -a 256 "$tmp/$name" | cut -d' ' -f1)
	fi
	[[ "$got" == "$want" ]] || fail "checksum mismatch for $name: checksums.txt says $want, the download is $got; not running it"
	mkdir -p "$tmp/x" "$DEST"
	if [[ $ext == zip ]]; then
		unzip -q -o "$tmp/$name" -d "$tmp/x"
	else
		tar -xzf "$tmp/$name" -C "$tmp/x"
	fi
	[[ -f "$tmp/x/$bin" ]] || fail "$name holds no $bin"
	mv "$tmp/x/$bin" "$DEST/$bin"
	chmod +x "$DEST/$bin"
	rm -rf "$tmp"
	echo "Downloaded opm-action $VERSION ($name, sha256 $got)"
}

case "${1:-}" in
resolve) resolve ;;
download) download ;;
*) fail "usage: release.sh resolve|download" ;;
esac
