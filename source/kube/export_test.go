package kube

// cachedObjects returns how many objects the informer holds (the tests check
// that a field-selected informer holds only the objects it follows).
func (f *follower) cachedObjects() int {
	if st := f.store.Load(); st != nil {
		return len((*st).ListKeys())
	}
	return 0
}
