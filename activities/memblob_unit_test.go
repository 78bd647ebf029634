package activities_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ctxcompact/orchestrator/internal/blob"
)

// memBlob is an in-memory activities.ObjectStore. Like blob.Store it keeps
// content under blob.ContentKey (tenants/{tenant}/{kind}/{sha[:2]}/{sha})
// and answers a missing key with blob.ErrNotFound, a wrong digest with
// blob.ErrChecksum.
type memBlob struct {
	mu      sync.Mutex
	objects map[string][]byte
	puts    []string // keys written, in order
	deletes []string // keys deleted, in order
}

func newMemBlob() *memBlob { return &memBlob{objects: map[string][]byte{}} }

func (m *memBlob) PutContent(_ context.Context, tenant, kind string, data []byte) (blob.Ref, error) {
	sha := blob.SHA256Hex(data)
	key := blob.ContentKey(tenant, kind, sha)
	if key == "" {
		return blob.Ref{}, fmt.Errorf("put content: bad tenant %q or kind %q", tenant, kind)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = bytes.Clone(data)
	m.puts = append(m.puts, key)
	return blob.Ref{Key: key, SHA256: sha, Size: int64(len(data))}, nil
}

func (m *memBlob) PutRunContent(_ context.Context, tenant, runID, kind string, data []byte) (blob.Ref, error) {
	sha := blob.SHA256Hex(data)
	key := blob.RunContentKey(tenant, runID, kind, sha)
	if key == "" {
		return blob.Ref{}, fmt.Errorf("put run content: bad tenant %q, run %q or kind %q", tenant, runID, kind)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = bytes.Clone(data)
	m.puts = append(m.puts, key)
	return blob.Ref{Key: key, SHA256: sha, Size: int64(len(data))}, nil
}

func (m *memBlob) PutRunContentString(ctx context.Context, tenant, runID, kind, text string) (blob.Ref, error) {
	return m.PutRunContent(ctx, tenant, runID, kind, []byte(text))
}

func (m *memBlob) DeletePrefix(_ context.Context, prefix string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			delete(m.objects, k)
			m.deletes = append(m.deletes, k)
			n++
		}
	}
	return n, nil
}

func (m *memBlob) PutContentString(ctx context.Context, tenant, kind, text string) (blob.Ref, error) {
	return m.PutContent(ctx, tenant, kind, []byte(text))
}

func (m *memBlob) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, blob.ErrNotFound)
	}
	return bytes.Clone(data), nil
}

func (m *memBlob) GetString(ctx context.Context, key string) (string, error) {
	data, err := m.Get(ctx, key)
	return string(data), err
}

func (m *memBlob) GetVerified(ctx context.Context, key, wantSHA string) ([]byte, error) {
	data, err := m.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if blob.SHA256Hex(data) != wantSHA {
		return nil, fmt.Errorf("get %s: %w", key, blob.ErrChecksum)
	}
	return data, nil
}

func (m *memBlob) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	m.deletes = append(m.deletes, key)
	return nil
}

// putCount is how many writes the store served.
func (m *memBlob) putCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.puts)
}

// has reports whether key holds an object.
func (m *memBlob) has(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objects[key]
	return ok
}
