// Package mcp is the Model Context Protocol face of the orchestrator: an
// MCP server (on the official Go SDK) whose tools compress a conversation
// to a checkpoint, recover and search what compaction cut, and report a
// session's context status, and whose resources are a run's compacted
// output and original. Every tool and resource acts for one tenant: the
// tenant of the API key over HTTP (served by package httpapi at /mcp),
// or the tenant of the environment over stdio (`starter mcp`).
//
// The tools reuse what the HTTP API runs: the gateway for submitting
// events (the same validation), package runview for waiting for a run
// and reading its answer and conversations (the same wait, the same
// not found), and the audit service for status, recovery and search (the
// same id and session checks). Conversation text never goes to the logs.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/runview"
)

// Tool names.
const (
	ToolCheckpoint = "compress_to_checkpoint"
	ToolRecover    = "recover_context"
	ToolSearch     = "search_context"
	ToolStatus     = "context_status"
)

// URI templates of the resources.
const (
	OutputTemplate   = "ctxcompact://runs/{run}/output"
	OriginalTemplate = "ctxcompact://runs/{run}/original"
)

// DefaultWait is how long compress_to_checkpoint waits for its run when
// wait_seconds is not given: under the 60 s request timeout common MCP
// clients apply.
const DefaultWait = 30 * time.Second

// Deps are what the MCP server needs.
type Deps struct {
	// Gateway submits events and waits for runs.
	Gateway *gateway.Gateway
	// Audit answers status, recovery, search and the resources; its Store
	// and Blob are the deployment's.
	Audit *audit.Service
	// MaxWait caps wait_seconds (httpapi.DefaultMaxWait when zero).
	MaxWait time.Duration
	// MaxRequestBytes caps a request body over HTTP (the API's own limit
	// applies first); zero is httpapi.DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// Draining, when set, is cancelled as the process starts shutting
	// down: waiting tool calls stop waiting and answer with the run id.
	Draining context.Context
	// Logger receives failures (never conversation text); nil discards.
	Logger *slog.Logger
	// Version is the server version the MCP handshake reports.
	Version string
}

// Service builds MCP servers over the deployment, one per tenant.
type Service struct {
	deps Deps
	// runs waits for and reads runs as the HTTP API and the web UI do.
	runs    *runview.Reader
	log     *slog.Logger
	schemas *sdk.SchemaCache
	// in and out are the tools' JSON schemas, built once.
	in, out map[string]*jsonschema.Schema
}

// New checks deps and builds the tools' schemas.
func New(deps Deps) (*Service, error) {
	if deps.Gateway == nil || deps.Audit == nil || deps.Audit.Store == nil || deps.Audit.Blob == nil {
		return nil, errors.New("mcp: the gateway and the audit service (with its store and blob store) are required")
	}
	if deps.MaxWait <= 0 {
		deps.MaxWait = httpapi.DefaultMaxWait
	}
	if deps.MaxRequestBytes <= 0 {
		deps.MaxRequestBytes = httpapi.DefaultMaxRequestBytes
	}
	if deps.Version == "" {
		deps.Version = "dev"
	}
	s := &Service{deps: deps, log: deps.Logger, schemas: sdk.NewSchemaCache(),
		in: map[string]*jsonschema.Schema{}, out: map[string]*jsonschema.Schema{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.runs = &runview.Reader{Audit: deps.Audit, Draining: deps.Draining}
	if deps.Gateway.Temporal != nil {
		s.runs.Workflows = deps.Gateway
	}
	for name, types := range map[string][2]reflect.Type{
		ToolCheckpoint: {reflect.TypeFor[CheckpointInput](), reflect.TypeFor[CheckpointResult]()},
		ToolRecover:    {reflect.TypeFor[RecoverInput](), reflect.TypeFor[RecoverResult]()},
		ToolSearch:     {reflect.TypeFor[SearchInput](), reflect.TypeFor[SearchResult]()},
		ToolStatus:     {reflect.TypeFor[StatusInput](), reflect.TypeFor[StatusResult]()},
	} {
		var err error
		if s.in[name], err = schemaFor(types[0]); err != nil {
			return nil, fmt.Errorf("mcp: %s input schema: %w", name, err)
		}
		if s.out[name], err = schemaFor(types[1]); err != nil {
			return nil, fmt.Errorf("mcp: %s output schema: %w", name, err)
		}
	}
	return s, nil
}

// schemaFor is the JSON schema of a tool's argument or result type. A
// json.RawMessage (a conversation, a preset's stats) is any JSON value,
// not the array of bytes its Go type would say. Its schema has a
// description so that it is written as an object: the empty schema is
// written `true`, which some clients refuse as a property's schema.
func schemaFor(t reflect.Type) (*jsonschema.Schema, error) {
	return jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {Description: "any JSON value"},
	}})
}

// Server is the MCP server of one tenant: its tools and resources read
// and write that tenant's data only.
func (s *Service) Server(tenant string) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "ctxcompact", Title: "ctxcompact context compression", Version: s.deps.Version},
		&sdk.ServerOptions{
			Instructions: "Context compression for this agent's conversation. Call " + ToolCheckpoint + " with the conversation " +
				"when it nears its context limit and continue from the compacted conversation it returns; every cut in it names an " +
				"id that " + ToolRecover + " reads back word for word; " + ToolSearch + " finds earlier content; " + ToolStatus +
				" reports the session's usage.",
			SchemaCache: s.schemas,
			// The capability "logging" is not offered: nothing is logged
			// to clients.
			Capabilities: &sdk.ServerCapabilities{},
		})
	t := &tenantTools{svc: s, tenant: tenant}
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	sdk.AddTool(srv, &sdk.Tool{Name: ToolCheckpoint, Title: "Compress to checkpoint",
		Description: "Record a checkpoint of the session and compact the conversation given: it is archived (byte for byte) " +
			"and compacted under the model's context limit. The answer is the run's outcome (ids and figures) and the URI of the " +
			"compacted conversation (output_uri, in its own format), not the conversation itself; with include_handoff (true by " +
			"default in this release, false from the next) also the fresh-session handoff, about 11 KB on a typical session. " +
			"When the run takes longer than wait_seconds, the answer is the run id and status: call again with the same " +
			"arguments (the same event) to keep waiting, or read the resource output_uri.",
		InputSchema: s.in[ToolCheckpoint], OutputSchema: s.out[ToolCheckpoint],
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)},
	}, t.checkpoint)
	sdk.AddTool(srv, &sdk.Tool{Name: ToolRecover, Title: "Recover context",
		Description: "Recover, word for word, what was cut from the conversation to save context: a tool result that was " +
			"offloaded, a tool result or call input that was shortened or summarized, or the messages a summary replaced. " +
			"The reference, note or summary left in its place ends with the id to pass. Optionally ask for a line range of a long text.",
		InputSchema: s.in[ToolRecover], OutputSchema: s.out[ToolRecover], Annotations: readOnly,
	}, t.recover)
	sdk.AddTool(srv, &sdk.Tool{Name: ToolSearch, Title: "Search context",
		Description: "Search the earlier, compacted or offloaded parts of this session for a word, identifier or phrase. " +
			"Each hit names the id that reads its message back with " + ToolRecover + ".",
		InputSchema: s.in[ToolSearch], OutputSchema: s.out[ToolSearch], Annotations: readOnly,
	}, t.search)
	sdk.AddTool(srv, &sdk.Tool{Name: ToolStatus, Title: "Context status",
		Description: "The session's context status: its level (GREEN to CRITICAL), tokens against the context limit after " +
			"the last compaction, the recommendation, live offloads, the loop breaker, the compression history and the recent runs.",
		InputSchema: s.in[ToolStatus], OutputSchema: s.out[ToolStatus], Annotations: readOnly,
	}, t.status)
	srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "run-output", Title: "Compacted conversation of a run",
		URITemplate: OutputTemplate, MIMEType: "application/json",
		Description: "A finished run's compacted conversation, byte for byte, in the caller's format."}, t.readOutput)
	srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "run-original", Title: "Original conversation of a run",
		URITemplate: OriginalTemplate, MIMEType: "application/json",
		Description: "A run's original conversation as it was archived, byte for byte."}, t.readOriginal)
	return srv
}

// HTTPHandler serves the MCP streamable HTTP transport for the tenant of
// each request (httpapi.TenantOf: mount it as httpapi.Deps.MCP, behind
// the API's authentication and limits). It is stateless and answers JSON,
// so no stream outlives its request and holds a tenant's slot; a request
// without a tenant is a 400.
func (s *Service) HTTPHandler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		tenant := httpapi.TenantOf(r.Context())
		if tenant == "" {
			return nil
		}
		return s.Server(tenant)
	}, // No SDK logger: its lines could carry what a client sent.
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: s.deps.MaxRequestBytes})
}

// ServeStdio runs the server of tenant over stdin and stdout until the
// client closes them or ctx ends.
func (s *Service) ServeStdio(ctx context.Context, tenant string) error {
	err := s.Server(tenant).Run(ctx, &sdk.StdioTransport{})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp over stdio: %w", err)
	}
	return nil
}
