package named

// The page sizes of every listing of named elections (the API's
// ListElections, the sidecar's GET /elections, the status page's table and
// GET /status/elections, electctl elections): PageDefault rows when the
// caller names none, and at most PageMax, so an answer stays small whatever
// the count of elections (10,000 rows of JSON would be megabytes). Here,
// in the one package the node, the API and the client all import.
const (
	PageDefault = 100
	PageMax     = 1000
)
