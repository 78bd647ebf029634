// Package testkit holds nothing itself: its folders are the harness that
// only tests, benches and soaks the product, kept apart from it so that a
// reader can tell the product from its test kit by folder. blobtest,
// storetest, convtest, llmtest and memtest serve the package and e2e
// tests; versitygw starts the S3 server the tests use; probe and
// sessionlife measure what the agent gets back (the e2e tests and
// `make bench`); soak is `make soak`. The dev stack of `make run` lives
// beside it, in internal/devkit. Neither is linked into the production
// binaries (worker, starter): testkit_test.go checks it.
package testkit
