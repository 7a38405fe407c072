package file

// WithMountInfo is withMountInfo, for the tests.
var WithMountInfo = withMountInfo
