package membership

// HealthScore is memberlist's awareness score: 0 when this node's probes
// of others are answered in time, higher (up to the configured maximum,
// less one) when they are not, a sign that this node itself is slow or
// cut off. For metrics.
func (m *Membership) HealthScore() int { return m.list.GetHealthScore() }
