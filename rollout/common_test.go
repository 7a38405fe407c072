package rollout_test

import "time"

var testNow = time.Now()
