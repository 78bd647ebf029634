# Every target uses the local Go toolchain (go.mod pins Go 1.26.8).
export GOTOOLCHAIN := local

.PHONY: run test unit vet fmt build bench bench-go fuzz soak

## run: compact the sample conversation on the embedded stack (Temporal, Postgres, S3, offline summarizer)
run:
	go run ./cmd/dev

## test: every test, on real Temporal (in-process), Postgres and an S3 server (installs chromium and versitygw first when missing: deploy/test-deps.sh); test artifacts (the web UI's screenshots) in artifacts/
test:
	bash deploy/test-deps.sh
	mkdir -p artifacts
	go test -count=1 -timeout 30m -artifacts -outputdir $(CURDIR)/artifacts ./...

## unit: every test that needs no Postgres, S3, Temporal server or browser (go test -short: the others skip, saying what they need); the database and S3 settings point nowhere, so a test that reaches for either without skipping fails at once
unit: export TEST_DATABASE_URL := postgres://127.0.0.1:1/none?connect_timeout=1
unit: export DATABASE_URL := postgres://127.0.0.1:1/none?connect_timeout=1
unit: export BLOBTEST_SERVER := none
unit:
	go test -short -count=1 ./...

vet:
	go vet ./...

fmt:
	gofmt -l -w .

## build: the production binaries (they do not link the Temporal server)
build:
	go build -o bin/worker ./worker
	go build -o bin/starter ./starter

## bench: the system benchmarks on the real stack, written to BENCHMARKS.md (`go run ./cmd/bench -quick`: a 2-minute check)
bench:
	go run ./cmd/bench -out BENCHMARKS.md -judge-out BENCHMARKS-judge.json

## soak: the chaos soak of the production topology in processes (2,000 events over 10 minutes of faults; SOAK_FLAGS adds or overrides flags, e.g. SOAK_FLAGS='-benchmarks BENCHMARKS.md'; docs/testing.md)
soak:
	bash deploy/install-versitygw.sh
	go run ./cmd/soak -events 2000 -sessions 60 -tenants 3 -workers 2 -duration 10m $(SOAK_FLAGS)

## bench-go: the engine's Go micro-benchmarks
bench-go:
	go test -run '^$$' -bench . -benchmem ./internal/...

## fuzz: each parser fuzz target for 30s
fuzz:
	go test -run '^$$' -fuzz FuzzParseOpenAI -fuzztime 30s ./internal/conversation
	go test -run '^$$' -fuzz FuzzParseAnthropic -fuzztime 30s ./internal/conversation
	go test -run '^$$' -fuzz FuzzParseReAct -fuzztime 30s ./internal/conversation
