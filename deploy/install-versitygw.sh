#!/usr/bin/env bash
# Installs versitygw (the S3 gateway the integration tests run against) into
# $(go env GOPATH)/bin unless a binary of the pinned version is already there.
# It builds from source with `go install`, so it needs only the Go module
# proxy; a cold build takes a few minutes on 2 cores.
set -euo pipefail

VERSION="${VERSITYGW_VERSION:-v1.8.0}"
export GOTOOLCHAIN=local

bin_dir="$(go env GOPATH | cut -d: -f1)/bin"
bin="$bin_dir/versitygw"
# `go install` records the module version in the binary; `go version -m`
# reads it back, which is how an existing install is checked.
# The output is captured first: grep -q closing the pipe early would make
# pipefail report a failure.
info="$( [[ -x "$bin" ]] && go version -m "$bin" 2>/dev/null || true )"
if grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/versity/versitygw[[:space:]]+${VERSION}([[:space:]]|$)" <<<"$info"; then
	echo "install-versitygw: $bin is already $VERSION, nothing to do"
	exit 0
fi

if [[ -x "$bin" ]]; then
	echo "install-versitygw: $bin is not $VERSION, reinstalling"
fi
echo "install-versitygw: go install github.com/versity/versitygw/cmd/versitygw@$VERSION (a few minutes)"
start=$(date +%s)
go install "github.com/versity/versitygw/cmd/versitygw@$VERSION"
echo "install-versitygw: installed $bin in $(( $(date +%s) - start ))s"
