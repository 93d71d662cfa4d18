package engine

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// requestInfo is what checkRequest learnt of a request's header block.
type requestInfo struct {
	contentLen int64 // -1: no content-length
	// early, if set, answers the request without running anything, with
	// HTTP status httpStatus, as grpc-go answers the same request.
	early      *status.Status
	httpStatus int
}

var errMalformed = errors.New("malformed request")

// checkRequest checks a request header block whose fields passed the
// per-field checks (headerBlock.check, checkPseudos). An error means the
// request is malformed (RFC 9113 §8.1.1, §8.2, §8.3): the stream is reset
// with PROTOCOL_ERROR. Otherwise a request that is no gRPC call gets the
// answer grpc-go's server gives it, in grpc-go's order of checks
// (internal/transport/http2_server.go, operateHeaders).
func checkRequest(fields []hpack.HeaderField) (requestInfo, error) {
	info := requestInfo{contentLen: -1}
	var method, scheme, path, protocol, contentType string
	var hasMethod, hasScheme, hasPath, hasProtocol, isGRPC bool
	authorities, hosts := 0, 0
	var headerErr *status.Status
	for _, hf := range fields {
		if strings.HasPrefix(hf.Value, " ") || strings.HasPrefix(hf.Value, "\t") ||
			strings.HasSuffix(hf.Value, " ") || strings.HasSuffix(hf.Value, "\t") {
			return info, fmt.Errorf("%w: field %q starts or ends with white space", errMalformed, hf.Name)
		}
		switch hf.Name {
		case ":method":
			method, hasMethod = hf.Value, true
		case ":scheme":
			scheme, hasScheme = hf.Value, true
		case ":path":
			path, hasPath = hf.Value, true
		case ":protocol":
			protocol, hasProtocol = hf.Value, true
		case ":authority":
			authorities++
		case ":status":
			return info, fmt.Errorf("%w: :status in a request", errMalformed)
		case "host":
			hosts++
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			// §8.2.2: connection-specific fields.
			return info, fmt.Errorf("%w: connection-specific field %q", errMalformed, hf.Name)
		case "te":
			if hf.Value != "trailers" {
				return info, fmt.Errorf("%w: te: %q", errMalformed, hf.Value)
			}
		case "content-length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || (info.contentLen >= 0 && int64(n) != info.contentLen) {
				return info, fmt.Errorf("%w: content-length %q", errMalformed, hf.Value)
			}
			info.contentLen = int64(n)
		case "content-type":
			if hf.Value == "application/grpc" || strings.HasPrefix(hf.Value, "application/grpc+") || strings.HasPrefix(hf.Value, "application/grpc;") {
				isGRPC = true
			} else {
				contentType = hf.Value
			}
		case "grpc-timeout":
			if _, err := parseTimeout(hf.Value); err != nil && headerErr == nil {
				headerErr = status.Newf(codes.Internal, "malformed grpc-timeout: %v", err)
			}
		default:
			if _, err := decodeMetaValue(hf.Name, hf.Value); err != nil && headerErr == nil {
				headerErr = status.Newf(codes.Internal, "malformed binary metadata %q in header %q: %v", hf.Value, hf.Name, err)
			}
		}
	}
	// §8.3.1: every request has :method; all but CONNECT :scheme and a
	// non-empty :path (origin form, or "*" for OPTIONS); :protocol needs
	// SETTINGS_ENABLE_CONNECT_PROTOCOL, which we do not send.
	switch {
	case !hasMethod:
		return info, fmt.Errorf("%w: no :method", errMalformed)
	case hasProtocol:
		return info, fmt.Errorf("%w: :protocol %q", errMalformed, protocol)
	case method == http.MethodConnect:
		if hasScheme || hasPath {
			return info, fmt.Errorf("%w: CONNECT with :scheme or :path", errMalformed)
		}
	case !hasScheme || scheme == "":
		return info, fmt.Errorf("%w: no :scheme", errMalformed)
	case !hasPath || path == "":
		return info, fmt.Errorf("%w: no :path", errMalformed)
	case path[0] != '/' && (path != "*" || method != http.MethodOptions):
		return info, fmt.Errorf("%w: :path %q", errMalformed, path)
	}
	// grpc-go's answers, in its order.
	switch {
	case authorities > 1 || hosts > 1:
		info.early, info.httpStatus = status.Newf(codes.Internal, "num values of :authority: %v, num values of host: %v, both must only have 1 value as per HTTP/2 spec", authorities, hosts), http.StatusBadRequest
	case !isGRPC:
		info.early, info.httpStatus = status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", contentType), http.StatusUnsupportedMediaType
	case headerErr != nil:
		info.early, info.httpStatus = headerErr, http.StatusBadRequest
	case authorities == 0 && hosts == 0:
		info.early, info.httpStatus = status.New(codes.Internal, "no host or :authority header present"), http.StatusBadRequest
	case method != http.MethodPost:
		info.early, info.httpStatus = status.Newf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", method), http.StatusMethodNotAllowed
	}
	return info, nil
}
