package blob

import (
	"fmt"
	"strings"
)

// Kinds of content stored under a tenant. They are the second path segment of
// a content key, so listing one tenant's archives is a single prefix scan.
const (
	// KindArchive holds the originals: the gateway stores the caller's
	// bytes once, as their archive, which is also the run's input.
	KindArchive = "archive"
	KindOffload = "offload"
	KindOutput  = "output"
	KindChunk   = "chunk"
	// KindWork holds a run's working conversations between its steps,
	// each the rendering of the conversation a step saved.
	KindWork = "work"
	// KindSnapshot holds a proxy session's snapshots between
	// compactions (store.Snapshot), each what the host added since the
	// one before.
	KindSnapshot = "snapshot"
)

// MaxTenantLen bounds tenant IDs so that keys stay far below S3's 1024-byte
// key limit whatever the kind and hash.
const MaxTenantLen = 128

// maxKindLen bounds kinds for the same reason as MaxTenantLen.
const maxKindLen = 32

// ValidateTenant reports why tenant cannot be used as a key prefix, or nil.
// Tenants become a path segment, so anything that could escape or merge
// segments ("/", "..", empty) is rejected, and the alphabet is kept to
// characters every S3 implementation stores verbatim.
func ValidateTenant(tenant string) error {
	switch {
	case tenant == "":
		return fmt.Errorf("tenant: empty")
	case len(tenant) > MaxTenantLen:
		return fmt.Errorf("tenant %.20q...: %d characters, at most %d allowed", tenant, len(tenant), MaxTenantLen)
	case tenant == "." || strings.Contains(tenant, ".."):
		return fmt.Errorf("tenant %q: must not be %q or contain %q", tenant, ".", "..")
	}
	for i, r := range tenant {
		if !isTenantChar(r) {
			return fmt.Errorf("tenant %q: character %q at byte %d not allowed (use A-Z a-z 0-9 . _ -)", tenant, r, i)
		}
	}
	return nil
}

func isTenantChar(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') ||
		r == '.' || r == '_' || r == '-'
}

// ValidateKind reports why kind cannot be used as a key segment, or nil. Any
// short lowercase segment is accepted rather than a fixed list, so a new kind
// of content needs no change here; the Kind constants are the ones in use.
func ValidateKind(kind string) error {
	if kind == "" {
		return fmt.Errorf("kind: empty")
	}
	if len(kind) > maxKindLen {
		return fmt.Errorf("kind %q: %d characters, at most %d allowed", kind, len(kind), maxKindLen)
	}
	for i, r := range kind {
		if !((r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-') {
			return fmt.Errorf("kind %q: character %q at byte %d not allowed (use a-z 0-9 -)", kind, r, i)
		}
	}
	return nil
}

// ValidateSHA256 reports whether s is a lowercase hex SHA-256 digest.
func ValidateSHA256(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("sha256 %q: %d characters, want 64 lowercase hex", s, len(s))
	}
	for i, r := range s {
		if !((r >= '0' && r <= '9') || (r >= 'a' && r <= 'f')) {
			return fmt.Errorf("sha256 %q: character %q at byte %d is not lowercase hex", s, r, i)
		}
	}
	return nil
}

// ContentKey returns the object key for content of the given kind and
// SHA-256 owned by tenant: tenants/{tenant}/{kind}/{sha[:2]}/{sha}. The
// two-character fan-out keeps any one listing prefix small.
//
// It returns "" when any part is invalid, and every Store method rejects an
// empty key, so a bad tenant can never reach S3; call ValidateTenant at the
// API boundary to tell the caller what is wrong.
func ContentKey(tenant, kind, sha256hex string) string {
	if ValidateTenant(tenant) != nil || ValidateKind(kind) != nil || ValidateSHA256(sha256hex) != nil {
		return ""
	}
	return "tenants/" + tenant + "/" + kind + "/" + sha256hex[:2] + "/" + sha256hex
}

// RunContentKey is the key of an intermediate object of run runID:
// tenants/{tenant}/runs/{run}/{kind}/{sha}. "" when a part is invalid.
// A run holds a handful of intermediates, so its prefix needs no fan-out;
// without one, an S3 server over a file system (versitygw, MinIO) makes
// and removes one folder less per object.
func RunContentKey(tenant, runID, kind, sha256hex string) string {
	if ValidateTenant(tenant) != nil || ValidateRunID(runID) != nil || ValidateKind(kind) != nil || ValidateSHA256(sha256hex) != nil {
		return ""
	}
	return "tenants/" + tenant + "/runs/" + runID + "/" + kind + "/" + sha256hex
}

// RunPrefix is the prefix of run runID's intermediate objects, ending in
// "/" so that run "r1" never matches "r10".
func RunPrefix(tenant, runID string) (string, error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", err
	}
	if err := ValidateRunID(runID); err != nil {
		return "", err
	}
	return "tenants/" + tenant + "/runs/" + runID + "/", nil
}

// ValidateRunID reports why id cannot be a key segment: 1-128 letters,
// digits, '.', '_' or '-', and not "." or "..".
func ValidateRunID(id string) error {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return fmt.Errorf("run id %.40q: 1-128 characters, not . or ..", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("run id %.40q: only letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}

// TenantPrefix returns the key prefix under which all of tenant's objects
// live, ending in "/" so that tenant "a" never matches tenant "ab".
func TenantPrefix(tenant string) (string, error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", err
	}
	return "tenants/" + tenant + "/", nil
}

// ParseContentKey splits a key of exactly ContentKey's grammar,
// tenants/{tenant}/{kind}/{sha[:2]}/{sha}, or RunContentKey's,
// tenants/{tenant}/runs/{run}/{kind}/{sha}, and reports why any other key
// is not one: a key that came from a caller or from inside a conversation
// is never trusted as a path ("tenants/a/../b/…" is refused, not cleaned).
func ParseContentKey(key string) (tenant, kind, sha string, err error) {
	parts := strings.Split(key, "/")
	if len(parts) == 6 && parts[0] == "tenants" && parts[2] == "runs" {
		// A run's intermediate (RunContentKey): checked as a content key
		// with the fan-out its digest would have.
		if err := ValidateRunID(parts[3]); err != nil {
			return "", "", "", fmt.Errorf("key %.120q: %w", key, err)
		}
		if err := ValidateSHA256(parts[5]); err != nil {
			return "", "", "", fmt.Errorf("key %.120q: %w", key, err)
		}
		parts = []string{parts[0], parts[1], parts[4], parts[5][:2], parts[5]}
	}
	if len(parts) != 5 || parts[0] != "tenants" {
		return "", "", "", fmt.Errorf("key %.120q: not a content key (tenants/<tenant>/<kind>/<sha[:2]>/<sha256>)", key)
	}
	tenant, kind, fan, sha := parts[1], parts[2], parts[3], parts[4]
	if err := ValidateTenant(tenant); err != nil {
		return "", "", "", fmt.Errorf("key %.120q: %w", key, err)
	}
	if err := ValidateKind(kind); err != nil {
		return "", "", "", fmt.Errorf("key %.120q: %w", key, err)
	}
	if err := ValidateSHA256(sha); err != nil {
		return "", "", "", fmt.Errorf("key %.120q: %w", key, err)
	}
	if fan != sha[:2] {
		return "", "", "", fmt.Errorf("key %.120q: fan-out segment %q does not match the digest", key, fan)
	}
	return tenant, kind, sha, nil
}

// CheckOwned reports why key is not a content key of tenant, or nil. Every
// read or delete of a key a run did not make itself goes through it.
func CheckOwned(tenant, key string) error {
	owner, _, _, err := ParseContentKey(key)
	if err != nil {
		return err
	}
	if owner != tenant {
		return fmt.Errorf("key %.120q belongs to another tenant", key)
	}
	return nil
}
