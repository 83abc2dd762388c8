// The circuits of a run beside its maps (filled in by the next commit).
