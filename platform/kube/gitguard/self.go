package gitguard

// Self is who the Guard was told fluxd is (Config.Self); a nil Guard
// knows nothing.
func (g *Guard) Self() Self {
	if g == nil {
		return Self{}
	}
	return g.cfg.Self
}
