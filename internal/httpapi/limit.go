package httpapi

import (
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// CodeRateLimited: the tenant sent more requests, or more at once, than
// its limits allow; retry after the Retry-After header's seconds.
const CodeRateLimited = "rate_limited"

// Limits bound what one tenant may ask of the API. Zero fields are no
// limit.
type Limits struct {
	// RatePerSecond and Burst are a token bucket over the tenant's
	// requests.
	RatePerSecond float64
	Burst         int
	// Concurrent caps the tenant's requests in flight (a request waiting
	// for its run counts until it answers).
	Concurrent int
}

// limiter applies Limits per tenant. A tenant's state is made on its
// first request; tenants are the holders of API keys, so the map is
// bounded by them.
type limiter struct {
	limits  Limits
	mu      sync.Mutex
	tenants map[string]*tenantLimit
}

type tenantLimit struct {
	bucket   *rate.Limiter
	inFlight chan struct{}
}

func newLimiter(l Limits) *limiter {
	return &limiter{limits: l, tenants: map[string]*tenantLimit{}}
}

func (l *limiter) of(tenant string) *tenantLimit {
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

// acquire admits one request of tenant, or answers why not (a 429 with
// Retry-After). Call release when the request is answered.
func (l *limiter) acquire(tenant string) (release func(), err error) {
	t := l.of(tenant)
	if t.bucket != nil {
		res := t.bucket.Reserve()
		if delay := res.Delay(); delay > 0 {
			res.Cancel()
			return nil, rateLimited("more requests per second than the tenant's limit", delay)
		}
	}
	if t.inFlight == nil {
		return func() {}, nil
	}
	select {
	case t.inFlight <- struct{}{}:
		return func() { <-t.inFlight }, nil
	default:
		return nil, rateLimited("more requests in flight than the tenant's limit", time.Second)
	}
}

func rateLimited(msg string, after time.Duration) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Message: msg,
		RetryAfter: max(1, int(math.Ceil(after.Seconds())))}
}
