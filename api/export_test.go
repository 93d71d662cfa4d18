package api

import (
	"net/http"
	"time"
)

// NewHTTPHandlerKeepAlive is NewHTTPHandler with another SSE keep-alive
// interval, for tests.
func NewHTTPHandlerKeepAlive(b Backend, keepAlive time.Duration) http.Handler {
	return &httpHandler{b: b, keepAlive: keepAlive}
}
