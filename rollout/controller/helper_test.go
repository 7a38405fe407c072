package controller

// helperEnv, when set, makes the test binary run a controller process for the
// memory benchmark instead of the tests.
const helperEnv = "HOTCERT_ROLLOUT_MEMORY_HELPER"

func runMemoryHelper() int { return 0 }
