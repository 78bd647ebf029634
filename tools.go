//go:build tools

// This file pins modules that the project uses before every package imports
// them, so that `go mod tidy` keeps them. It is never built.
package tools

import (
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/tern/v2/migrate"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/johannesboyne/gofakes3/backend/s3afero"
	_ "github.com/johannesboyne/gofakes3/backend/s3mem"
	_ "github.com/sashabaranov/go-openai"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "github.com/tiktoken-go/tokenizer"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.temporal.io/sdk/worker"
	_ "go.temporal.io/sdk/workflow"
	_ "go.temporal.io/server/temporaltest"
)
