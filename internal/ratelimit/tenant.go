// Package ratelimit bounds what callers may ask of the HTTP surface (the
// JSON API and the web UI alike): each tenant's requests, and each client
// address's failed sign-ins, which cost a database lookup apiece and are
// never attributed to a tenant.
package ratelimit

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Refusal says why a request is not admitted and when to try again.
type Refusal struct {
	Reason     string
	RetryAfter time.Duration
}

func (r *Refusal) Error() string { return r.Reason }

// RetryAfterSeconds is RetryAfter as the Retry-After header says it: whole
// seconds, at least 1.
func (r *Refusal) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(r.RetryAfter.Seconds())))
}

// Limits bound what one tenant may ask. Zero fields are no limit.
type Limits struct {
	// RatePerSecond and Burst are a token bucket over the tenant's
	// requests.
	RatePerSecond float64
	Burst         int
	// Concurrent caps the tenant's requests in flight (a request waiting
	// for its run counts until it answers).
	Concurrent int
}

// Tenants applies Limits per tenant, to API and UI requests together. A
// tenant's state is made on its first request; tenants are the holders of
// API keys, so the map is bounded by them.
type Tenants struct {
	limits  Limits
	mu      sync.Mutex
	tenants map[string]*tenantLimit
}

type tenantLimit struct {
	bucket   *rate.Limiter
	inFlight chan struct{}
}

// NewTenants returns the limiter of l.
func NewTenants(l Limits) *Tenants {
	return &Tenants{limits: l, tenants: map[string]*tenantLimit{}}
}

func (l *Tenants) of(tenant string) *tenantLimit {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.tenants[tenant]
	if !ok {
		t = &tenantLimit{}
		if l.limits.RatePerSecond > 0 {
			t.bucket = rate.NewLimiter(rate.Limit(l.limits.RatePerSecond), max(l.limits.Burst, 1))
		}
		if l.limits.Concurrent > 0 {
			t.inFlight = make(chan struct{}, l.limits.Concurrent)
		}
		l.tenants[tenant] = t
	}
	return t
}

// Acquire admits one request of tenant, or returns a *Refusal. Call
// release when the request is answered.
func (l *Tenants) Acquire(tenant string) (release func(), err error) {
	t := l.of(tenant)
	if t.bucket != nil {
		res := t.bucket.Reserve()
		if delay := res.Delay(); delay > 0 {
			res.Cancel()
			return nil, &Refusal{Reason: "more requests per second than the tenant's limit", RetryAfter: delay}
		}
	}
	if t.inFlight == nil {
		return func() {}, nil
	}
	select {
	case t.inFlight <- struct{}{}:
		return func() { <-t.inFlight }, nil
	default:
		return nil, &Refusal{Reason: fmt.Sprintf("more than %d requests of the tenant in flight", cap(t.inFlight)), RetryAfter: time.Second}
	}
}
