package container

import "sort"

// Sort orders sandboxes and containers newest first (by creation time, then
// attempt), the order PodStatus promises.
func (p *PodStatus) Sort() {
	sort.SliceStable(p.Sandboxes, func(i, j int) bool {
		a, b := p.Sandboxes[i], p.Sandboxes[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.Attempt > b.Attempt
	})
	sort.SliceStable(p.Containers, func(i, j int) bool {
		a, b := p.Containers[i], p.Containers[j]
		if a.Attempt != b.Attempt {
			return a.Attempt > b.Attempt
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
}

// Sandbox returns the newest sandbox, or nil.
func (p *PodStatus) Sandbox() *Sandbox {
	if p == nil || len(p.Sandboxes) == 0 {
		return nil
	}
	return p.Sandboxes[0]
}

// ContainersNamed returns the containers with that name, newest first.
func (p *PodStatus) ContainersNamed(name string) []*Container {
	if p == nil {
		return nil
	}
	var out []*Container
	for _, c := range p.Containers {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// Latest returns the newest container with that name, or nil.
func (p *PodStatus) Latest(name string) *Container {
	cs := p.ContainersNamed(name)
	if len(cs) == 0 {
		return nil
	}
	return cs[0]
}
