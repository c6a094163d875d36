package monitor

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "internal error 500", err: apierrors.NewInternalError(errors.New("boom")), want: true},
		{name: "too many requests 429", err: apierrors.NewTooManyRequests("slow down", 1), want: true},
		{name: "service unavailable 503", err: apierrors.NewServiceUnavailable("restarting"), want: true},
		{name: "server timeout", err: apierrors.NewServerTimeout(gr, "get", 1), want: true},
		{name: "gateway timeout 504", err: apierrors.NewTimeoutError("slow", 1), want: true},
		{name: "other 5xx", err: apierrors.NewGenericServerResponse(502, "get", gr, "x", "bad gateway", 0, true), want: true},
		{name: "connection reset", err: fmt.Errorf("get: %w", syscall.ECONNRESET), want: true},
		{name: "connection refused", err: fmt.Errorf("get: %w", syscall.ECONNREFUSED), want: true},
		{name: "not found", err: apierrors.NewNotFound(gr, "x"), want: false},
		{name: "forbidden", err: apierrors.NewForbidden(gr, "x", errors.New("no")), want: false},
		{name: "conflict", err: apierrors.NewConflict(gr, "x", errors.New("changed")), want: false},
		{name: "context canceled", err: context.Canceled, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.err); got != tt.want {
				t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
