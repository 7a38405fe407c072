package mirror

// WithRetry sets how long a failed write waits before it is tried again.
var WithRetry = withRetry
