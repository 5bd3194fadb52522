package scheduler

// Partition guards (sharded replicas only). A replica takes the guard of a
// pod's partition (shard.Sharder.Guard) before deciding for the pod, and
// gives it back once the attempt is over: at once when the pod fits nowhere
// or its binding is refused; only when its own cache has read the binding
// from the log when the binding succeeds. While a guard is held the
// partition is not handed over; and the replica that takes it over first
// waits until its cache has read the log up to then (shard.Config.CatchUp).
// So the new owner always sees the bindings of the old one, and never binds
// a pod a second time.

// guard takes the guard of key's partition; it reports false when this
// replica does not own it (any more). Unsharded, it always succeeds.
func (s *Scheduler) guard(key string) bool {
	if s.sharder == nil {
		return true
	}
	done, ok := s.sharder.Guard(key)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.guards[key]; prev != nil {
		prev()
	}
	s.guards[key] = done
	return true
}

// unguard gives back key's guard, if held.
func (s *Scheduler) unguard(key string) {
	s.mu.Lock()
	done := s.guards[key]
	delete(s.guards, key)
	s.mu.Unlock()
	if done != nil {
		done()
	}
}

// unguardAll gives back every guard (the replica stops).
func (s *Scheduler) unguardAll() {
	s.mu.Lock()
	guards := s.guards
	s.guards = map[string]func(){}
	s.mu.Unlock()
	for _, done := range guards {
		done()
	}
}
