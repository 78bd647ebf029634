package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/runview"
)

// runsPrefix starts every resource URI.
const runsPrefix = "ctxcompact://runs/"

// runOf reads the run id of a resource URI "ctxcompact://runs/{run}/<suffix>".
func runOf(uri, suffix string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, runsPrefix)
	if !ok {
		return "", false
	}
	run, ok := strings.CutSuffix(rest, "/"+suffix)
	if !ok || strings.Contains(run, "/") || idcheck.Check("run", run) != nil {
		return "", false
	}
	return run, true
}

func (t *tenantTools) readOutput(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	return t.readRun(ctx, req.Params.URI, runview.Output)
}

func (t *tenantTools) readOriginal(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	return t.readRun(ctx, req.Params.URI, runview.Original)
}

// readRun answers a run's conversation resource (runview.Reader.Download)
// for this tenant only: another tenant's run, an unknown one, or a run
// without that conversation (an output before the run committed) is not
// found.
func (t *tenantTools) readRun(ctx context.Context, uri string, part runview.Part) (*sdk.ReadResourceResult, error) {
	run, ok := runOf(uri, string(part))
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	d, err := t.svc.runs.Download(ctx, t.tenant, run, part)
	switch {
	case runview.Status(err) == http.StatusNotFound:
		return nil, sdk.ResourceNotFoundError(uri)
	case err != nil:
		t.svc.log.Error("mcp resource read failed", "resource", part, "run", run, "tenant", t.tenant, "error", err)
		if what := httpapi.Outage(err); what != "" {
			return nil, fmt.Errorf("%s is unavailable; retry later", what)
		}
		return nil, errors.New("internal error (the operator's logs have the detail)")
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(d.Data)}}}, nil
}
