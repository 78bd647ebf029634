#!/usr/bin/env bash
# Installs what `make test` needs beyond Go and Postgres, when missing, so
# that the README's test command passes on a fresh machine by itself:
# Debian's chromium (the web UI's browser test) and versitygw (the S3
# server of the integration tests, built with `go install`). CI's
# .ci/run calls it too. When it cannot install something, it stops at once
# with the command that fixes it.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
	echo "test-deps: installing chromium (Debian package) for the web UI's browser test"
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "test-deps: chromium is missing and this user cannot install it; run: apt-get install -y chromium" >&2
			exit 1
		fi
		sudo="sudo"
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "test-deps: chromium is missing and there is no apt-get; install Chromium so that 'chromium' is on PATH" >&2
		exit 1
	fi
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq chromium
fi

bash deploy/install-versitygw.sh

# The clients nobody here wrote that the e2e tests drive (the MCP
# TypeScript SDK, the Standard Webhooks library, the TypeScript compiler
# for clients/typescript, the Anthropic and OpenAI SDKs of the proxy's
# agents), pinned by e2e/node/package-lock.json.
if ! command -v npm >/dev/null 2>&1; then
	echo "test-deps: npm is missing; run: apt-get install -y nodejs npm" >&2
	exit 1
fi
if [ ! -d e2e/node/node_modules ] || [ e2e/node/package-lock.json -nt e2e/node/node_modules/.package-lock.json ]; then
	echo "test-deps: npm ci in e2e/node"
	npm ci --prefix e2e/node --no-audit --no-fund --loglevel=error
fi
