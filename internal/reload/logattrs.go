package reload

// DefaultComponentKey is the log attribute that names the component when
// Settings.ComponentKey is empty: the default component label of the metrics.
const DefaultComponentKey = "component"

// Attrs returns the attributes every log line of a reloader starts with: the
// component under its one key, then LogAttrs. Failure, load and watch lines all
// use it, so a search on one key finds every line of a component.
func (s *Settings) Attrs() []any {
	key := s.ComponentKey
	if key == "" {
		key = DefaultComponentKey
	}
	return append([]any{key, s.Component}, s.LogAttrs...)
}
